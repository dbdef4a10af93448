"""The words every transport hands the agent: the task, a follow-up, the completion prompt.

- `task_text(text, context)`: the person's message plus what their editor shows.
- `follow_up(events, text, context)`: the events that give a later message of a chat to the
  agent as its next observation (prefixed with `FOLLOW_UP`, so a transcript can tell it
  from a tool result).
- `inline_prompt(...)` / `fit_inline_prompt(...)`: an inline completion's plain-text prompt
  (no chat template): the model's fill-in-the-middle format when it has one (models/fim.py),
  plain prefix completion when it has none, under a one-line file header comment; cut (far
  ends first) until it fits beside max_tokens. `InlinePrompt.shown(text)` turns what the
  model wrote into code to insert at the cursor (never a markdown fence).
- `completion_prompt(...)` / `fit_prompt(...)`: the older chat form of that prompt (a system
  message and a <CURSOR> marker), kept for benches that measure chat calls.
Nothing to run; tests/session/test_prompts.py and test_inline_prompt.py check them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent_server.agent.events import Event
from agent_server.models.base import Message, ModelBackend
from agent_server.models.fim import Infill
from agent_server.protocol.messages import EditorContext

FOLLOW_UP = "New message from the user:\n"  # how a later message reaches the agent
SYSTEM = (
    "You complete code at the cursor. Reply with only the code that belongs at <CURSOR>: "
    "no explanation, no code fences, nothing that is already before or after the cursor."
)
CURSOR = "<CURSOR>"


def task_text(text: str, context: EditorContext) -> str:
    """The person's message plus what their editor shows, as the agent's task."""
    parts = [text]
    if context.path:
        lang = f" ({context.language})" if context.language else ""
        parts.append(f"Open file: {context.path}{lang}")
    if context.selection and context.selection.text:
        s = context.selection
        parts.append(f"Selected (lines {s.start.line + 1}-{s.end.line + 1}):\n```\n{s.text}\n```")
    if context.diagnostics:
        lines = [
            f"- {d.path or context.path or '?'}:{d.line + 1} {d.severity}: {d.message}"
            for d in context.diagnostics[:50]
        ]
        parts.append("Diagnostics:\n" + "\n".join(lines))
    return "\n\n".join(parts)


def follow_up(events: list[Event], text: str, context: EditorContext) -> list[Event]:
    """Events that hand a later message to the agent: it arrives as the next observation.

    `rebuild_view` pairs an observation with the assistant reply before it; when the last
    run ended without one pending (a limit, a cancel), a short assistant note stands in.
    """
    seq = max((e.seq for e in events), default=0)
    step = max((e.step for e in events), default=0)
    pending = False
    last_finish: Event | None = None
    for e in events:
        if e.kind == "assistant":
            pending = True
        elif e.kind == "observation":
            pending = False
        elif e.kind == "run_finished":
            last_finish = e
    out: list[Event] = []
    if not pending:
        status = last_finish.data.get("status", "stopped") if last_finish else "stopped"
        note = last_finish.data.get("message", "") if last_finish else ""
        seq += 1
        content = f"(the previous request ended: {status}. {note})"
        message = {"role": "assistant", "content": content}
        out.append(Event("assistant", step, {"message": message, "completion": None}, seq))
    seq += 1
    content = FOLLOW_UP + task_text(text, context)
    observation = {"message": {"role": "user", "content": content}, "files": {}, "error": False}
    out.append(Event("observation", step, observation, seq))
    return out


def completion_prompt(path: str, language: str, prefix: str, suffix: str) -> list[Message]:
    lang = f" ({language})" if language else ""
    user = f"File: {path}{lang}\n\n{prefix}{CURSOR}{suffix}"
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def fit_prompt(
    backend: ModelBackend, path: str, language: str, prefix: str, suffix: str, max_tokens: int
) -> list[Message]:
    """The prompt with prefix/suffix cut (far ends first) until it fits beside max_tokens."""
    budget = backend.context_window - max_tokens
    while True:
        prompt = completion_prompt(path, language, prefix, suffix)
        if backend.count_tokens(prompt) <= budget or (not prefix and not suffix):
            return prompt
        # Halve the longer side, keeping the text next to the cursor.
        if len(prefix) >= len(suffix):
            prefix = prefix[len(prefix) // 2 :] if len(prefix) > 1 else ""
        else:
            suffix = suffix[: len(suffix) // 2] if len(suffix) > 1 else ""


# --- inline completion: a plain-text prompt ---------------------------------------------------

RAW_ROLE = "prompt"  # the one stored "message" of a plain-text prompt (suggestions row)
# A blank line, a closing fence or a new top-level definition ends a multi-line suggestion;
# a suggestion in the middle of a line ends with the line. (vLLM's /v1/completions takes at
# most 4 stop strings.)
BLOCK_STOPS = ("\n\n", "\n```", "\ndef ", "\nclass ")
LINE_STOPS = ("\n",)
_COMMENT = {"#": ("python", "shell", "shellscript", "ruby", "perl", "r", "yaml", "toml",
                  "dockerfile", "makefile", "julia", "elixir", "coffeescript", "powershell"),
            "//": ("javascript", "typescript", "javascriptreact", "typescriptreact", "c",
                   "cpp", "java", "go", "rust", "kotlin", "swift", "csharp", "scala", "php",
                   "dart", "zig", "groovy", "objective-c"),
            "--": ("sql", "lua", "haskell", "elm")}  # fmt: skip
_LANG_OF_SUFFIX = {".py": "python", ".pyi": "python", ".sh": "shell", ".rb": "ruby",
                   ".js": "javascript", ".ts": "typescript", ".c": "c", ".h": "c",
                   ".cpp": "cpp", ".java": "java", ".go": "go", ".rs": "rust",
                   ".sql": "sql", ".lua": "lua", ".yaml": "yaml", ".yml": "yaml",
                   ".toml": "toml"}  # fmt: skip
_OPEN_FENCE = re.compile(r"\A[ \t]*```[\w+#.-]*[ \t]*(?:\n|\Z)")
_CLOSE_FENCE = re.compile(r"(?:\A|\n)[ \t]*```")


@dataclass(frozen=True)
class InlinePrompt:
    text: str  # what the model continues
    stop: tuple[str, ...]  # stop strings for this cursor (a line or a block)
    healed: str = ""  # the prefix's last space, left out of `text` (see `shown`)
    infill: bool = False  # in the model's fill-in-the-middle format

    def messages(self) -> list[Message]:
        """How the prompt is stored (suggestions.prompt_messages): one plain-text entry, with
        the space it left out of the prefix (`healed`): the learner puts it back in front of
        what the person wrote when it trains on that (learner/demos.py)."""
        entry: Message = {"role": RAW_ROLE, "content": self.text, "format": self.kind}
        if self.healed:
            entry["healed"] = self.healed
        return [entry]

    @property
    def kind(self) -> str:
        return "fim" if self.infill else "prefix"

    def shown(self, text: str) -> str:
        """What the model wrote as code to insert at the cursor: the space the prompt left
        out taken back, a leading markdown fence and anything from a closing fence on
        dropped, trailing whitespace trimmed; "" when nothing but a fence or blanks is left."""
        if self.healed and text.startswith(self.healed):
            text = text[len(self.healed) :]
        if (opened := _OPEN_FENCE.match(text)) is not None:
            text = text[opened.end() :]
        if (closed := _CLOSE_FENCE.search(text)) is not None:
            text = text[: closed.start()]
        return text.rstrip() if text.strip() else ""


def file_header(path: str, language: str) -> str:
    """A one-line comment naming the file, in the language's comment syntax ("" if unknown)."""
    lang = (language or "").lower()
    if not lang and "." in path:
        lang = _LANG_OF_SUFFIX.get(path[path.rfind(".") :].lower(), "")
    for mark, languages in _COMMENT.items():
        if lang in languages and path:
            return f"{mark} {path}\n"
    return ""


def inline_prompt(
    path: str, language: str, prefix: str, suffix: str, infill: Infill | None
) -> InlinePrompt:
    """The plain-text prompt of an inline completion at the end of `prefix`.

    A prefix ending in a space leaves that space out of the prompt: BPE tokenizers write a
    word with its leading space (" return"), so a prompt ending in a bare space asks for an
    unnatural continuation (seen on SmolLM2: `    ` -> ` return`, five spaces). `shown`
    takes the space back off the completion.
    """
    healed = " " if prefix.endswith(" ") else ""
    head = file_header(path, language) + prefix[: len(prefix) - len(healed)]
    rest_of_line = suffix.split("\n", 1)[0]
    stop = LINE_STOPS if rest_of_line.strip() else BLOCK_STOPS
    if infill is not None:
        return InlinePrompt(infill.render(head, suffix), stop, healed, infill=True)
    return InlinePrompt(head, stop, healed)


def fit_inline_prompt(
    backend: ModelBackend, path: str, language: str, prefix: str, suffix: str, max_tokens: int
) -> InlinePrompt:
    """`inline_prompt` with prefix/suffix cut (far ends first) until it fits beside max_tokens."""
    budget = backend.context_window - max_tokens
    infill = backend.infill()
    if infill is None:
        suffix = suffix.split("\n", 1)[0]  # prefix completion reads none of it but the line
    while True:
        prompt = inline_prompt(path, language, prefix, suffix, infill)
        if backend.count_text_tokens(prompt.text) <= budget or (not prefix and not suffix):
            return prompt
        if len(prefix) >= len(suffix):
            prefix = prefix[len(prefix) // 2 :] if len(prefix) > 1 else ""
        else:
            suffix = suffix[: len(suffix) // 2] if len(suffix) > 1 else ""
