"""The README's Python section works as shown: its snippet runs and prints
exactly the output block that follows it."""
import contextlib
import io
import os
import re

from conftest import ROOT


def readme_python_section():
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Python\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, re.S)
    code = [b for lang, b in blocks if lang == "python"]
    output = [b for lang, b in blocks if lang == "text"]
    assert len(code) == 1 and len(output) == 1, "one python block and its output block"
    return code[0], output[0]


def test_readme_snippet_prints_what_it_shows(fg, tmp_path, monkeypatch):
    code, expected = readme_python_section()
    monkeypatch.chdir(tmp_path)  # it writes demo.plan
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), {})
    assert out.getvalue() == expected, \
        "the README's Python section no longer prints what it shows: update its output block"
    assert os.path.exists(tmp_path / "demo.plan")
