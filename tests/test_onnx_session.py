"""ONNX Runtime sessions on the CPU (issue 22, part 6): the CUDA provider options a GPU run gets (TF32 off unless asked,
cuDNN's heuristic algorithm choice), and `--device cuda` without a visible GPU as one line, judged by the providers
the session got. A fake ONNX Runtime stands in for the GPU build (onnxruntime-gpu on a machine without a GPU)."""

from __future__ import annotations

from pathlib import Path

import onnxruntime as ort
import pytest

from medchallenge.errors import InputError
from medchallenge.onnx_session import TF32_VARIABLE, create_session, cuda_provider_options

MODEL = Path(__file__).parents[1] / "algorithms" / "tb_caverns" / "model" / "tb_caverns.onnx"


def test_cuda_runs_without_tf32_and_with_heuristic_convolution_search_by_default(monkeypatch):
    monkeypatch.delenv(TF32_VARIABLE, raising=False)
    assert cuda_provider_options() == {"use_tf32": "0", "cudnn_conv_algo_search": "HEURISTIC"}
    monkeypatch.setenv(TF32_VARIABLE, "1")
    assert cuda_provider_options()["use_tf32"] == "1"
    monkeypatch.setenv(TF32_VARIABLE, "yes")
    with pytest.raises(InputError, match=r"\$MEDCHALLENGE_CUDA_TF32='yes': expected 0 \(TF32 off, the default\) or 1"):
        cuda_provider_options()


class FakeGpuRuntime:
    """onnxruntime-gpu as seen without a GPU: CUDA offered, and its provider either raising at session creation
    (`fails`) or left out of the session (ONNX Runtime's silent fallback)."""

    def __init__(self, monkeypatch, fails: str | None = None):
        self.calls: list[tuple[list, dict]] = []
        self.fails = fails
        real = ort.InferenceSession
        fake = self

        class Session:
            def __init__(self, path, sess_options=None, providers=None, **kwargs):
                fake.calls.append((providers, kwargs))
                names = [p[0] if isinstance(p, tuple) else p for p in providers]
                if fake.fails and "CUDAExecutionProvider" in names:
                    raise RuntimeError(fake.fails)
                self.inner = real(path, sess_options=sess_options, providers=["CPUExecutionProvider"])

            def get_providers(self):
                return self.inner.get_providers()

        monkeypatch.setattr(ort, "InferenceSession", Session)
        monkeypatch.setattr(ort, "get_available_providers", lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
        monkeypatch.setattr(ort, "preload_dlls", lambda **kwargs: None, raising=False)


def test_the_cuda_provider_gets_the_options_and_no_fallback_prints(monkeypatch, capsys):
    fake = FakeGpuRuntime(monkeypatch)
    create_session(MODEL, "auto")
    providers, kwargs = fake.calls[0]
    assert providers == [("CUDAExecutionProvider", {"use_tf32": "0", "cudnn_conv_algo_search": "HEURISTIC"}),
                         "CPUExecutionProvider"]
    assert kwargs == {"enable_fallback": 0}
    assert capsys.readouterr().out == ""


def test_device_cuda_whose_session_got_no_cuda_provider_is_one_line(monkeypatch, capsys):
    FakeGpuRuntime(monkeypatch)  # the session silently runs on the CPU
    with pytest.raises(InputError, match=r"^--device cuda: no GPU is visible \(ONNX Runtime's CUDA provider did not "
                                         r"start; the session got \['CPUExecutionProvider'\]\); give the container a "
                                         r"GPU, or use --device auto$"):
        create_session(MODEL, "cuda")


def test_device_cuda_whose_provider_fails_without_a_gpu_is_one_line(monkeypatch, capsys):
    FakeGpuRuntime(monkeypatch, fails="CUDA failure 100: no CUDA-capable device is detected ; GPU=0\nmore")
    with pytest.raises(InputError, match=r"^--device cuda: no GPU is visible \(ONNX Runtime's CUDA provider did not "
                                         r"start: CUDA failure 100: no CUDA-capable device is detected\); give the "
                                         r"container a GPU"):
        create_session(MODEL, "cuda")
    assert capsys.readouterr().out == ""


def test_device_auto_falls_back_to_the_cpu_with_a_warning(monkeypatch, caplog):
    fake = FakeGpuRuntime(monkeypatch, fails="CUDA failure 100: no CUDA-capable device is detected")
    session = create_session(MODEL, "auto")
    assert session.get_providers() == ["CPUExecutionProvider"]
    assert fake.calls[-1][0] == ["CPUExecutionProvider"]
    assert "CUDA provider failed to start (CUDA failure 100" in caplog.text


def test_device_cuda_with_a_cpu_only_runtime_is_one_line():
    assert "CUDAExecutionProvider" not in ort.get_available_providers()  # the test environment's CPU build
    with pytest.raises(InputError, match=r"^--device cuda: no GPU for this ONNX Runtime \(a CPU-only build"):
        create_session(MODEL, "cuda")
