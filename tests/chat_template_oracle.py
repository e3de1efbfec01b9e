#!/usr/bin/env python3
"""Writes tests/data/chat_templates.json: chat templates rendered by Python's
jinja2 the way Hugging Face transformers renders them (a sandboxed
environment with trim_blocks and lstrip_blocks, raise_exception defined),
the oracle for chat_template_test's Jinja cases (Duet renders them with the
vendored minja engine).

    python3 tests/chat_template_oracle.py   # needs jinja2 (pip install jinja2)

Each case: a template, the eos_token it sees, the token its model ends an
answer with, and three conversations with
the generation prompt — a user message; a system and a user message; a
user message, an answer and a user message, whose contents are the markers
Duet's ChatTemplate::apply_next renders with.
"""
import json
import os

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

EARLIER = "\x01duet-earlier-user\x01"
ANSWER = "\x01duet-answer\x01"

TEMPLATES = {
    # SmolLM2-135M-Instruct's, as stored in its GGUF: a default system turn.
    "smollm2": (
        "<|im_end|>",
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
        "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
        "{{ '<|im_start|>assistant\n' }}{% endif %}"),
    # Phi-3's turn shape: a family Duet has no built-in format for.
    "phi3": (
        "<|end|>",
        "{% for message in messages %}{{'<|' + message['role'] + '|>' + '\n' + "
        "message['content'] + '<|end|>\n'}}{% endfor %}{% if add_generation_prompt %}"
        "{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}"),
    # Gemma 3's instruction template: the system message heads the first
    # user turn; roles must alternate; contents are trimmed.
    "gemma3": (
        "<eos>",
        "{{ bos_token }}\n"
        "{%- if messages[0]['role'] == 'system' -%}\n"
        "    {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}\n"
        "    {%- set loop_messages = messages[1:] -%}\n"
        "{%- else -%}\n"
        "    {%- set first_user_prefix = \"\" -%}\n"
        "    {%- set loop_messages = messages -%}\n"
        "{%- endif -%}\n"
        "{%- for message in loop_messages -%}\n"
        "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
        "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
        "    {%- endif -%}\n"
        "    {%- if (message['role'] == 'assistant') -%}\n"
        "        {%- set role = \"model\" -%}\n"
        "    {%- else -%}\n"
        "        {%- set role = message['role'] -%}\n"
        "    {%- endif -%}\n"
        "    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}\n"
        "    {{- message['content'] | trim -}}\n"
        "    {{ '<end_of_turn>\n' }}\n"
        "{%- endfor -%}\n"
        "{%- if add_generation_prompt -%}\n"
        "    {{'<start_of_turn>model\n'}}\n"
        "{%- endif -%}\n"),
    # Llama 3's turns, with the BOS token written by the template.
    "llama3": (
        "<|eot_id|>",
        "{% set loop_messages = messages %}{% for message in loop_messages %}"
        "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
        "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
        "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
        "{% endif %}"),
}

# The control token each family's model ends its answers with.
TURN_ENDS = {"smollm2": "<|im_end|>", "phi3": "<|end|>", "gemma3": "<end_of_turn>",
             "llama3": "<|eot_id|>"}

CONVERSATIONS = [
    [{"role": "user", "content": "Hi"}],
    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
    [{"role": "user", "content": EARLIER}, {"role": "assistant", "content": ANSWER},
     {"role": "user", "content": "And?"}],
]


# Tools, for the templates that write them: two functions, the key order of
# their schemas kept as sent.
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city.",
        "parameters": {"type": "object",
                       "properties": {"unit": {"enum": ["C", "F"]}, "city": {"type": "string"}},
                       "required": ["city", "unit"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "The time now."}},
]
CALL = {"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Oslo", "unit": "C"}}}
TOOL_CONVERSATIONS = [
    # tools offered; a user message; a system and a user message
    (True, [{"role": "user", "content": "Weather in Oslo?"}]),
    (True, [{"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Oslo?"}]),
    # a call, its result, and the generation prompt for the answer
    (True, [{"role": "user", "content": "Weather in Oslo?"},
            {"role": "assistant", "content": "", "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "3 C"}]),
    # the same without tools offered (tool_choice none), two results
    (False, [{"role": "user", "content": "Weather in Oslo?"},
             {"role": "assistant", "content": "", "tool_calls": [CALL]},
             {"role": "tool", "tool_call_id": "call_1", "content": "3 C"},
             {"role": "tool", "tool_call_id": "call_2", "content": "noon"}]),
]
# Templates of real models, read from tests/data/templates/.
TOOL_TEMPLATES = {"qwen2.5": ("<|im_end|>", "qwen2.5-instruct.jinja"),
                  "llama3-style": ("<|eot_id|>", "llama3-style-tools.jinja")}


def raise_exception(message):
    raise TemplateError(message)


def tojson(value, indent=None):
    """transformers' tojson filter: json.dumps, non-ASCII kept, nothing escaped for HTML."""
    return json.dumps(value, ensure_ascii=False, indent=indent)


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    env.filters["tojson"] = tojson
    here = os.path.dirname(os.path.abspath(__file__))
    cases = []
    for name, (eos, text) in TEMPLATES.items():
        template = env.from_string(text)
        renders = [template.render(messages=m, add_generation_prompt=True, bos_token="",
                                   eos_token=eos) for m in CONVERSATIONS]
        cases.append({"name": name, "eos_token": eos, "turn_end": TURN_ENDS[name],
                      "template": text, "renders": renders})
    tool_cases = []
    for name, (eos, file) in TOOL_TEMPLATES.items():
        with open(os.path.join(here, "data", "templates", file)) as f:
            template = env.from_string(f.read())
        renders = [template.render(messages=m, tools=TOOLS if offered else None,
                                   add_generation_prompt=True, bos_token="", eos_token=eos)
                   for offered, m in TOOL_CONVERSATIONS]
        tool_cases.append({"name": name, "eos_token": eos, "file": file, "renders": renders})
    out = os.path.join(here, "data", "chat_templates.json")
    with open(out, "w") as f:
        json.dump({"made_by": "tests/chat_template_oracle.py (jinja2)",
                   "conversations": CONVERSATIONS, "cases": cases, "tools": TOOLS,
                   "tool_conversations": [{"tools": offered, "messages": m}
                                          for offered, m in TOOL_CONVERSATIONS],
                   "tool_cases": tool_cases}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
