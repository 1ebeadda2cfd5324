#!/usr/bin/env python3
"""Renders the chat-template fixtures with jinja2, as Hugging Face's
apply_chat_template does, into tests/unit/frontends/chat/expected.json.

The C++ renderer (frontends/ChatTemplate.cpp) must give the same text for every
template x conversation (tests/unit/frontends/ChatTemplateTest.cpp reads the
JSON). The templates (*.jinja) are the models' own chat_template strings;
conversations.json holds the inputs.

  gen_chat_fixtures.py            rewrite expected.json
  gen_chat_fixtures.py --check    render again and compare (exit 1 on a
                                  difference, 77 when jinja2 is missing)
"""
import json
import os
import sys

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "unit", "frontends", "chat")

# The special-token strings each template is rendered with (the models'
# bos_token / eos_token).
TOKENS = {
    "llama3": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama3.1": ("<|begin_of_text|>", "<|eot_id|>"),
    "llama2": ("<s>", "</s>"),
    "mistral-v0.1": ("<s>", "</s>"),
    "mistral-nemo": ("<s>", "</s>"),
    "qwen2": ("", "<|im_end|>"),
    "qwen2.5": ("", "<|im_end|>"),
    "qwen3": ("", "<|im_end|>"),
    "gemma2": ("<bos>", "<eos>"),
    "gemma3": ("<bos>", "<eos>"),
    "phi3.5": ("<s>", "<|endoftext|>"),
}


class TemplateError(Exception):
    pass


def render_all():
    import jinja2
    import jinja2.sandbox
    import jinja2.ext

    def raise_exception(message):
        raise TemplateError(message)

    # What transformers' apply_chat_template uses.
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.globals["raise_exception"] = raise_exception
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)

    with open(os.path.join(HERE, "conversations.json"), encoding="utf-8") as f:
        conversations = json.load(f)
    out = {}
    for name in sorted(TOKENS):
        with open(os.path.join(HERE, name + ".jinja"), encoding="utf-8") as f:
            source = f.read()
        template = env.from_string(source)
        bos, eos = TOKENS[name]
        cases = {}
        for conv, spec in conversations.items():
            try:
                text = template.render(messages=spec["messages"], bos_token=bos, eos_token=eos,
                                       add_generation_prompt=spec["add_generation_prompt"])
                cases[conv] = {"text": text}
            except TemplateError as e:
                cases[conv] = {"error": str(e)}
        out[name] = {"bos_token": bos, "eos_token": eos, "cases": cases}
    return json.dumps(out, indent=1, ensure_ascii=False, sort_keys=True) + "\n"


def main():
    check = "--check" in sys.argv[1:]
    try:
        import jinja2  # noqa: F401
    except ImportError:
        print("gen_chat_fixtures: jinja2 is not installed (pip install jinja2); skipped")
        return 77 if check else 1
    text = render_all()
    path = os.path.join(HERE, "expected.json")
    if check:
        with open(path, encoding="utf-8") as f:
            if f.read() != text:
                print("gen_chat_fixtures: %s differs from what jinja2 renders; run "
                      "tests/models/gen_chat_fixtures.py" % path)
                return 1
        print("gen_chat_fixtures: expected.json matches jinja2")
        return 0
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    print("gen_chat_fixtures: wrote " + path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
