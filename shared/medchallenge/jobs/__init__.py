"""The one job runner: a grand-challenge algorithm job (a container run under grand-challenge's conditions), used
by the emulator, pre-flight and the hospital gateway alike, and for an organiser's evaluation container
(medchallenge.evaluation.container: its input folder and ground truth mounted read-only, run_job's `input_dir` and
`ground_truth`).

    from medchallenge.jobs import JobLimits, run_job, upload_case
    image = upload_case(Path("TST_001.nii.gz"), store)          # panimg, as GC converts an upload
    result = run_job("team/algorithm:1", [image.value(1, CT_IMAGE)], [TB_CAVERN_BOXES], work / "job-1",
                     model=Path("model.tar.gz"), limits=JobLimits(memory_gb=8, time_limit_s=1200), gpu="auto")
    result.status, result.error, result.wall_seconds, result.cpu_seconds, result.gpu_seconds, result.peak_memory_bytes,
    result.used_gpu, result.outputs

conditions.py: GC's conditions and the limits; values.py: socket values; uploads.py: panimg; model_tarball.py:
/opt/ml/model; launch.py, docker_run.py, process_run.py: starting the job's process; outputs.py: reading the
output sockets, kinds.py: checking each by its declared kind as grand-challenge does; runner.py: run_job;
usage.py: what jobs used in all (wall, CPU and GPU seconds, peak memory).
"""

from .conditions import CONDITIONS, JobLimits
from .docker_run import ENGINES, DockerImage, host_has_gpu
from .errors import EmulationError, EngineFault
from .launch import Execution, JobFolders, Launcher
from .model_tarball import extract_model
from .outputs import OutputResult
from .process_run import LocalProcess
from .runner import GpuRequest, JobResult, resolve_gpu, run_job
from .uploads import UploadedImage, upload_case
from .values import SocketValue, serialize_values, sort_values

__all__ = ["CONDITIONS", "DockerImage", "ENGINES", "EmulationError", "EngineFault", "Execution", "GpuRequest",
           "JobFolders", "JobLimits", "JobResult", "Launcher", "LocalProcess", "OutputResult", "SocketValue",
           "UploadedImage", "extract_model", "host_has_gpu", "resolve_gpu", "run_job", "serialize_values",
           "sort_values", "upload_case"]
