#!/usr/bin/env python3
"""A minimal agent loop: a model's tool calls dispatched to sandpod.tools.

The "model" here is scripted (a list of replies in the shape of Anthropic's
tool_use blocks) so the loop runs anywhere; swap `ScriptedModel.reply` for a
real client call (`client.messages.create(tools=specs, messages=history)`).
"""

import json

import sandpod


class ScriptedModel:
    """Answers in turn: two tool calls, then a final text."""

    def __init__(self) -> None:
        self.script = [
            {"type": "tool_use", "id": "t1", "name": "write_file",
             "input": {"path": "test_add.sh", "content": "[ $((2 + 2)) -eq 4 ] && echo ok\n"}},
            {"type": "tool_use", "id": "t2", "name": "shell",
             "input": {"command": "sh test_add.sh"}},
            {"type": "text", "text": "the tests pass"},
        ]

    def reply(self, tools: list, history: list) -> dict:
        assert tools, "the model is given the tool specs"
        return self.script.pop(0)


def main() -> None:
    model = ScriptedModel()
    history: list = [{"role": "user", "content": "write a test and run it"}]
    with sandpod.Sandbox.create() as sb, sandpod.tools(sb) as tools:
        specs = tools.specs(format="anthropic")
        while True:
            block = model.reply(specs, history)
            history.append({"role": "assistant", "content": [block]})
            if block["type"] == "text":
                print("model:", block["text"])
                break
            result = tools.call(block["name"], block["input"])
            print(f"tool {block['name']} -> ok={result['ok']}: {result['message'][:60]!r}")
            history.append({"role": "user", "content": [{
                "type": "tool_result", "tool_use_id": block["id"],
                "content": result["message"], "is_error": not result["ok"]}]})
        # What the model's command printed reached it as the tool's result.
        assert "ok" in json.dumps(history[-2])


if __name__ == "__main__":
    main()
