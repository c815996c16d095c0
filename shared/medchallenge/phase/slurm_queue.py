"""What Slurm still has pending or running (squeue), and its client commands run with one-line errors: the part of
the Slurm backend that a job's lease (phase.leases) asks too."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from ..errors import InputError

# Slurm job states of work not over yet (squeue, scontrol)
ACTIVE = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "RESIZING",
          "SUSPENDED", "STAGE_OUT", "SIGNALING", "STOPPED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}


class SlurmError(InputError):
    """Slurm refused or could not be asked (one line)."""


def slurm_command(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run one of Slurm's client commands (SlurmError, one line, where it is missing, hangs or fails)."""
    try:
        result = subprocess.run(list(args), capture_output=True, text=True, timeout=120, errors="replace")
    except FileNotFoundError:
        raise SlurmError(f"--backend slurm: no `{args[0]}` on PATH (Slurm's client commands are needed where "
                         "`phase run` runs)") from None
    except subprocess.TimeoutExpired:
        raise SlurmError(f"`{args[0]}` did not answer in 120 s (is slurmctld up? `scontrol ping`)") from None
    if check and result.returncode != 0:
        lines = result.stderr.strip().splitlines()
        raise SlurmError(f"`{args[0]}` failed: {lines[-1] if lines else f'status {result.returncode}'}")
    return result


def queue_states(ids: Sequence[str]) -> dict[str, str]:
    """squeue's state of each job and array task (one line per task: ARRAY_INDEX) of `ids` that Slurm still has
    pending or running."""
    if not ids:
        return {}
    listed = slurm_command("squeue", "--noheader", "--array", "--format=%i %T", f"--jobs={','.join(ids)}",
                           check=False)
    if listed.returncode != 0:
        if "Invalid job id" in listed.stderr:  # all of them over and forgotten by slurmctld
            return {}
        lines = listed.stderr.strip().splitlines()
        raise SlurmError(f"`squeue` failed: {lines[-1] if lines else f'status {listed.returncode}'}")
    fields = [line.split() for line in listed.stdout.splitlines()]
    return {f[0]: f[1] for f in fields if len(f) == 2 and f[1] in ACTIVE}


def active_jobs(ids: Sequence[str]) -> list[str]:
    """The jobs (and array tasks) of `ids` Slurm still has pending or running."""
    return list(queue_states(ids))
