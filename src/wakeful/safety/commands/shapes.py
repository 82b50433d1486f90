"""Shapes that span commands: a download or a decoded blob fed to something that runs it.

`curl … | sh`, `wget -O- … | sudo bash`, `echo … | base64 -d | sh` (a pipeline), and
`sh <(curl …)`, `bash -c "$(curl …)"`, `eval "$(wget -qO- …)"` (a substitution whose output a
shell or interpreter runs) are denied: the code that runs was never seen by anyone.
"""

from __future__ import annotations

from .analysis import Analysis, quote_command

__all__ = ["judge_shapes"]

_FEEDS: dict[str, str] = {
    "download": "a download",
    "decode": "decoded hidden code",
}


def judge_shapes(analysis: Analysis) -> None:
    """Deny every download or decoder whose output reaches a command that runs it as code."""
    commands = analysis.commands
    stages: dict[int, list[tuple[int, int]]] = {}
    for command in commands:
        for pipeline, stage in command.pipes:
            stages.setdefault(pipeline, []).append((stage, command.index))
    for command in commands:
        if "stdin-code" in analysis.roles.get(command.index, set()):
            for pipeline, stage in command.pipes:
                for later_stage, index in stages[pipeline]:
                    if later_stage > stage and "download" in analysis.roles.get(index, set()):
                        analysis.flag_line(
                            f"{command.text} | … {commands[index].text}",
                            "deny",
                            "connects a shell's input and output to the network (a reverse shell)",
                        )
    for command in commands:
        roles = analysis.roles.get(command.index, set())
        feeds = next((label for role, label in _FEEDS.items() if role in roles), None)
        if feeds is None:
            continue
        for pipeline, stage in command.pipes:
            for later_stage, index in stages[pipeline]:
                if later_stage > stage and "stdin-code" in analysis.roles.get(index, set()):
                    runner = commands[index]
                    analysis.flag_line(
                        f"{command.text} | … {runner.text}",
                        "deny",
                        f"pipes {feeds} ({quote_command(command.text)}) into "
                        f"{quote_command(runner.text)}, which runs it as code unseen",
                    )
        for consumer in analysis.consumers_of(command):
            if analysis.roles.get(consumer.index, set()) & {"code", "stdin-code"}:
                analysis.flag_line(
                    consumer.text,
                    "deny",
                    f"runs {feeds} ({quote_command(command.text)}) as code unseen",
                )
                break
