"""`medchallenge gateway --config FILE [--check | --conformance | --job-runner]`: the command line."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import threading
from pathlib import Path

from ..errors import report_errors
from ..io import user_path
from ..logs import log_one_line_per_record, setup_logging
from .config import load_config
from .conformance import conformance_statement
from .job_runner import serve_job_runner
from .submit_host import check_submit_host
from .worker import Gateway

log = logging.getLogger("medchallenge.gateway")

DESCRIPTION = "`medchallenge gateway --config gateway.toml`: between a hospital's PACS and the detectors."


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="medchallenge gateway", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=user_path, default=Path(os.environ.get("GATEWAY_CONFIG", "/etc/medchallenge/"
                                                                           "gateway.toml")),
                        help="the configuration file (default $GATEWAY_CONFIG or /etc/medchallenge/gateway.toml)")
    parser.add_argument("--check", action="store_true", help="check the configuration and stop")
    parser.add_argument("--conformance", action="store_true",
                        help="print the gateway's DICOM Conformance Statement (Markdown, PS3.2's layout) for this "
                             "configuration and stop")
    parser.add_argument("--job-runner", action="store_true",
                        help="run the jobs of the routes with an inbox (the service holding the Docker socket, "
                             "apart from the gateway; gateway/job_runner.py)")
    return parser


@report_errors
def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    setup_logging()
    log_one_line_per_record()  # DICOM headers and what peers send end up in log lines: no line of theirs
    logging.getLogger("pynetdicom").setLevel(logging.WARNING)
    config = load_config(args.config)
    if args.conformance:  # a statement of the configuration: no cluster asked for (a reviewer's laptop has none)
        print(conformance_statement(config), end="")
        return 0
    if not args.job_runner:  # the job runner runs only the routes with an inbox
        check_submit_host(config, args.config)
    if args.check:
        log.info("%s: configuration valid (%d route(s))", args.config, len(config.routes))
        return 0
    if args.job_runner:
        stopping = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stopping.set())
        signal.signal(signal.SIGINT, lambda *_: stopping.set())
        serve_job_runner(config, stopping)
        return 0
    gateway = Gateway(config)
    signal.signal(signal.SIGTERM, lambda *_: gateway.stop())
    signal.signal(signal.SIGINT, lambda *_: gateway.stop())
    gateway.serve()
    return 0
