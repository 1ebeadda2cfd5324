"""DLPack on the GPU: torch.from_dlpack(ex.device_logits()) sees the arena's
logits without a copy. Skips without torch and a CUDA device (CI); the lead
runs it on the GPU machine with scripts/gpu-python.sh."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def cuda_plan(fg):
    if not fg.cuda_available() or not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    return fg.compile("demo", ctx=256, prefill=[16])


def test_device_logits_alias_the_arena(fg, cuda_plan):
    ex = fg.Executor(cuda_plan, device="cuda")
    assert ex.device == "cuda"
    host = ex.step([5], [0])
    view = ex.device_logits()
    assert view.valid
    t = torch.from_dlpack(view)
    assert t.device.type == "cuda" and t.dtype == torch.float32 and tuple(t.shape) == (1, 512)
    np.testing.assert_array_equal(t.cpu().numpy(), host)
    # No copy: a second view is the same device memory.
    assert torch.from_dlpack(ex.device_logits()).data_ptr() == t.data_ptr()
    kept = t.clone()

    host2 = ex.step([6], [1])
    assert not view.valid
    with pytest.raises(fg.Error, match="overwritten by a later step"):
        torch.from_dlpack(view)
    # A tensor made before aliases the arena: it shows the next step (documented).
    np.testing.assert_array_equal(t.cpu().numpy(), host2)
    np.testing.assert_array_equal(kept.cpu().numpy(), host)


def test_cuda_logits_match_the_cpu_reference(fg, cuda_plan):
    gpu, cpu = fg.Executor(cuda_plan, device="cuda"), fg.Executor(cuda_plan, device="cpu")
    for pos, tok in enumerate([5, 17, 42]):
        a, b = gpu.step([tok], [pos]), cpu.step([tok], [pos])
        err = np.abs(a - b).max() / max(np.abs(b).max(), 1e-6)
        assert err < 1e-2, f"step {pos}: normalised error {err}"
    assert gpu.generate([5, 17, 42], 4) == cpu.generate([5, 17, 42], 4)
