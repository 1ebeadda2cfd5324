"""The Python module on the CPU device, checked against the C++ CLI."""
import json
import re

import numpy as np
import pytest

DEMO_FLAGS = ["--ctx", "256", "--prefill", "16"]


def cli_tokens(stdout):
    m = re.search(r"^tokens: (.*)$", stdout, re.M)
    assert m, stdout
    return [int(t) for t in m.group(1).split()]


def cli_error(stderr):
    """The library's message: the CLI prints it as `fusegraph: error: MSG`."""
    m = re.search(r"^fusegraph: error: (.*)$", stderr, re.M)
    assert m, stderr
    return m.group(1)


def test_step_logits_equal_cli_dump(fg, cli, demo_plan, tmp_path):
    # A one-token prompt: every row of the dump comes from the decode entry.
    dump = tmp_path / "ref.npy"
    rc, out, err = cli("run", "demo", "--prompt-ids", "5", "--steps", "4", "--device", "cpu",
                       "--dump-logits", str(dump), *DEMO_FLAGS)
    assert rc == 0, err
    ref = np.load(dump)
    tokens = cli_tokens(out)
    assert ref.shape == (4, 512) and len(tokens) == 4

    ex = fg.Executor(demo_plan, device="cpu")
    assert ex.device == "cpu" and ex.is_decoder and ex.vocab == 512 and ex.ctx == 256
    fed = [5] + tokens[:3]
    for pos, tok in enumerate(fed):
        logits = ex.step([tok], [pos])
        assert logits.dtype == np.float32 and logits.shape == (1, 512)
        np.testing.assert_array_equal(logits[0], ref[pos])
        assert int(np.argmax(logits[0])) == tokens[pos]


def test_step_returns_a_copy(fg, demo_plan):
    ex = fg.Executor(demo_plan, device="cpu")
    first = ex.step([5], [0])
    kept = first.copy()
    ex.step([6], [1])
    np.testing.assert_array_equal(first, kept)  # the next step did not change it


def test_generate_tokens_equal_cli(fg, cli, demo_plan):
    rc, out, err = cli("run", "demo", "--prompt-ids", "5,17,42", "--steps", "6", "--device", "cpu",
                       *DEMO_FLAGS)
    assert rc == 0, err
    expected = cli_tokens(out)
    ex = fg.Executor(demo_plan, device="cpu")
    streamed = []
    tokens = ex.generate([5, 17, 42], 6, on_token=streamed.append)
    assert tokens == expected and streamed == expected
    assert ex.stats["prompt_tokens"] == 3 and ex.stats["decode_steps"] == 5
    assert ex.position == 3 + 5 and ex.history == [5, 17, 42] + expected[:5]
    # The same again after reset (the default): the same tokens.
    assert ex.generate([5, 17, 42], 6) == expected
    # Continuing the conversation feeds the last token and goes on.
    more = ex.generate([expected[-1]], 2, reset=False)
    assert len(more) == 2 and ex.position == 3 + 6 + 1


def test_prefill_step_agrees_with_decode_steps(fg):
    plan = fg.compile("demo", ctx=256, prefill=[16], cuda=False, all_logits=True)
    prompt = list(range(3, 19))
    ex = fg.Executor(plan, device="cpu")
    rows = ex.step(prompt, list(range(16)))  # prefill_16, every row
    assert rows.shape == (16, 512)
    ex.reset()
    for pos, tok in enumerate(prompt):
        one = ex.step([tok], [pos])
        np.testing.assert_allclose(one[0], rows[pos], rtol=1e-4, atol=1e-5)


def test_sampler_and_stopping(fg, demo_plan):
    ex = fg.Executor(demo_plan, device="cpu")
    seen = []

    def lowest(logits):
        assert logits.shape == (512,)
        return int(np.argmin(logits))

    tokens = ex.generate([1, 2], 5, sample=lowest,
                         on_token=lambda t: (seen.append(t), len(seen) < 3)[1])
    assert tokens == seen and len(tokens) == 3
    np.testing.assert_array_equal(ex.last_logits.shape, (1, 512))

    with pytest.raises(fg.Error, match=r"the sampler returned token 512, outside \[0, 512\)"):
        ex.generate([1], 2, sample=lambda logits: 512)

    def broken(logits):
        raise ValueError("sampler bug")
    with pytest.raises(ValueError, match="sampler bug"):  # the callback's own exception
        ex.generate([1], 2, sample=broken)

    # A callback that calls back in is refused (with its own exception raised by generate).
    with pytest.raises(fg.Error, match="this Executor is busy"):
        ex.generate([1], 2, on_token=lambda t: ex.step([t], [1]))
    assert ex.generate([1, 2], 2) == ex.generate([1, 2], 2)  # and it stays usable


def test_builtin_sampling_equals_cli(fg, cli, demo_plan):
    # The same seed draws the same tokens as `fusegraph run` (the draw is a
    # function of the seed, the position and the generate call).
    flags = ["--temperature", "0.9", "--top-k", "40", "--top-p", "0.95", "--seed", "7"]
    rc, out, err = cli("run", "demo", "--prompt-ids", "5,17,42", "--steps", "8", "--device",
                       "cpu", *flags, *DEMO_FLAGS)
    assert rc == 0, err
    expected = cli_tokens(out)
    ex = fg.Executor(demo_plan, device="cpu")
    kw = dict(temperature=0.9, top_k=40, top_p=0.95, seed=7)
    assert ex.generate([5, 17, 42], 8, **kw) == expected
    again = ex.generate([5, 17, 42], 8, **kw)  # a new generate draws anew
    assert len(again) == 8 and again != expected
    assert fg.Executor(demo_plan, device="cpu").generate([5, 17, 42], 8, **kw) == expected
    assert ex.generate([5, 17, 42], 8) == ex.generate([5, 17, 42], 8)  # greedy by default
    with pytest.raises(fg.Error, match="give either sample= or temperature"):
        ex.generate([1], 2, sample=lambda logits: 0, temperature=0.5)
    with pytest.raises(fg.Error, match=r"top-p must be in \(0, 1\] \(1: off\), got 2"):
        ex.generate([1], 2, top_p=2.0)


def test_errors_carry_the_library_message(fg, cli, demo_plan):
    rc, _, err = cli("run", "demo", "--prompt-ids", "999", "--steps", "1", "--device", "cpu",
                     *DEMO_FLAGS)
    assert rc != 0
    # The CLI refuses the id before running, naming its flag; the library's
    # own check (what the Executor raises) names the input and the step.
    assert "token id 999 is outside the model's vocabulary of 512 tokens" in cli_error(err)
    ex = fg.Executor(demo_plan, device="cpu")
    with pytest.raises(fg.Error) as e:
        ex.step([999], [0])
    assert str(e.value) == "step 0: input 'tokens'[0] = 999 is outside [0, 512)"
    # The step wrote no state: the next good one runs.
    assert ex.step([5], [0]).shape == (1, 512)

    rc, _, err = cli("run", "no/such/model.gguf", "--prompt-ids", "1")
    with pytest.raises(fg.Error) as e:
        fg.compile("no/such/model.gguf")
    assert rc != 0 and str(e.value) == cli_error(err)

    with pytest.raises(fg.Error, match=r"positions\[0\] = 2147483648 does not fit in 32 bits"):
        ex.step([1], [2**31])
    with pytest.raises(fg.Error, match=r"no entry takes 3 tokens \(decode takes 1, prefill_16 "
                                       r"takes 16\)"):
        ex.step([1, 2, 3], [0, 1, 2])
    with pytest.raises(fg.Error, match="unknown kv_dtype 'f8'"):
        fg.compile("demo", kv_dtype="f8")
    with pytest.raises(fg.Error, match="unknown fusion pattern 'rms_nrom'"):
        fg.compile("demo", disable_fusion=["rms_nrom"])
    # "auto" (the default) takes the GPU only when there is one and the plan has a program.
    assert fg.Executor(demo_plan).device == "cpu"  # demo_plan has no CUDA program
    with pytest.raises(fg.Error, match="device must be 'cpu', 'cuda' or 'auto'"):
        fg.Executor(demo_plan, device="tpu")
    with pytest.raises(fg.Error, match="lives on the host"):
        ex.device_logits()  # DLPack views are for the CUDA device
    ex.step([1], [0])
    with pytest.raises(fg.Error, match=r"step\(\) has changed the KV cache"):
        ex.generate([1], 2, reset=False)


def test_plan_round_trip(fg, demo_plan, tmp_path):
    path = tmp_path / "demo.plan"
    demo_plan.save(str(path))
    again = fg.Plan.load(str(path))
    assert again.entries == demo_plan.entries == ["decode", "prefill_16"]
    assert again.options == demo_plan.options
    assert again.options["ctx"] == 256 and again.options["prefill"] == [16]
    assert again.ir == demo_plan.ir and again.facts() == demo_plan.facts()
    a, b = fg.Executor(demo_plan, device="cpu"), fg.Executor(again, device="cpu")
    np.testing.assert_array_equal(a.step([7], [0]), b.step([7], [0]))

    with pytest.raises(fg.Error, match="compiled plan: load it with fusegraph.Plan.load"):
        fg.compile(str(path))
    bad = tmp_path / "bad.plan"
    data = bytearray(path.read_bytes())
    data[100] ^= 0xFF
    bad.write_bytes(bytes(data))
    with pytest.raises(fg.Error, match="bad.plan"):
        fg.Plan.load(str(bad))


def subset_equal(mine, theirs, where="facts"):
    """Every key of `mine` is in `theirs` with an equal value (recursively)."""
    if isinstance(mine, dict):
        assert isinstance(theirs, dict), where
        for k, v in mine.items():
            assert k in theirs, f"{where}.{k} missing from inspect --json"
            subset_equal(v, theirs[k], f"{where}.{k}")
    elif isinstance(mine, list):
        assert isinstance(theirs, list) and len(mine) == len(theirs), where
        for i, (x, y) in enumerate(zip(mine, theirs)):
            subset_equal(x, y, f"{where}[{i}]")
    else:
        assert mine == theirs, f"{where}: {mine!r} != {theirs!r}"


def test_facts_and_fusion_report_equal_inspect_json(fg, cli, tmp_path):
    plan = fg.compile("demo", ctx=256, prefill=[16])  # with the CUDA program (NVRTC)
    path = tmp_path / "demo.plan"
    plan.save(str(path))
    rc, out, err = cli("inspect", str(path), "--json")
    assert rc == 0, err
    ref = json.loads(out)
    facts = plan.facts()
    assert set(facts) == set(ref) - {"plan"}
    subset_equal(facts, ref)
    assert facts["cuda"]["entries"][0]["kernel_launches"] > 0

    report = plan.fusion_report()
    applied = ref["fusions"]["applied"]
    assert [(a.entry, a.pattern, a.count, a.roots, a.nodes) for a in report.applied] == \
        [(a["entry"], a["pattern"], a["count"], a["roots"], a["nodes"]) for a in applied]
    assert [(r.entry, r.pattern, r.root, r.node, r.reason) for r in report.refused] == \
        [(r["entry"], r["pattern"], r["root"], r["node"], r["reason"])
         for r in ref["fusions"]["refused"]]
    assert report.count("rms_norm_mul") == sum(a["count"] for a in applied
                                               if a["pattern"] == "rms_norm_mul") > 0
    assert any("tokens" in r.reason for r in report.refused)


def test_compile_options_reach_the_plan(fg):
    plan = fg.compile("demo", ctx=128, prefill=[8, 32], fusion=False, kv_dtype="f32", cuda=False)
    opts = plan.options
    assert (opts["ctx"], opts["prefill"], opts["fusion"], opts["kv_dtype"]) == \
        (128, [8, 32], False, "f32")
    assert plan.entries == ["decode", "prefill_8", "prefill_32"]
    assert plan.fusion_report().applied == [] and "fused." not in plan.ir
    assert not plan.has_cuda_program
    off = fg.compile("demo", ctx=128, cuda=False, disable_fusion=["rms_norm_mul"])
    assert off.fusion_report().count("rms_norm_mul") == 0
    assert off.options["disable_fusion"] == ["rms_norm_mul"]
    assert "rms_norm_mul" in fg.fusion_patterns()


def test_fg_text_without_a_decoder_abi(fg, demo_plan):
    src = str(fg_root() / "tests" / "ir" / "cli" / "roundtrip.fg")
    with pytest.raises(fg.Error, match="brings its own entries and ctx"):
        fg.compile(src, ctx=64)
    plan = fg.compile(src, cuda=False)
    ex = fg.Executor(plan, device="cpu")
    assert not ex.is_decoder and plan.entries == ["decode"]
    with pytest.raises(fg.Error, match="entries have no roles; give entry="):
        ex.step([3], [0])
    n = ex.step([3], [0], entry="decode")  # its one result, rms_norm of an embedding row
    assert n.shape == (1, 8)
    np.testing.assert_allclose(np.mean(n.astype(np.float64) ** 2), 1.0, rtol=1e-4)
    with pytest.raises(fg.Error, match="generate\\(\\) needs a decoder plan: "):
        ex.generate([1], 2)


def fg_root():
    from conftest import ROOT
    return ROOT
