"""A small parser for the shell commands agents issue: enough structure to label them.

It splits a command line into *pipelines* (separated by ``&&``, ``||``, ``;``, ``&`` and
newlines) of *simple commands* (separated by ``|``), each with its words (quotes removed),
its redirections and its here-document body. It understands single and double quotes,
backslash escapes, ``$(…)`` and backticks (kept inside the word), comments, line
continuations, ``<<``/``<<-`` here-documents (the body is attached to the command that
opened it) and ``<<<`` here-strings. It never executes or expands anything, and it never
fails: whatever it cannot make sense of stays a word.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: operators that end a pipeline (all mean "then" for labelling purposes)
LIST_OPERATORS = ("&&", "||", ";;", ";", "&", "\n")
#: operators that join the commands of a pipeline
PIPE_OPERATORS = ("|&", "|")
#: grouping: treated as command boundaries
GROUP_OPERATORS = ("(", ")")
#: redirection operators, longest first
REDIRECTIONS = ("&>>", "<<<", "<<-", ">>", ">|", "&>", ">&", "<&", "<>", "<<", ">", "<")
_OPERATORS = sorted(
    (*LIST_OPERATORS, *PIPE_OPERATORS, *GROUP_OPERATORS, *REDIRECTIONS), key=len, reverse=True
)


@dataclass
class Redirect:
    op: str  # one of REDIRECTIONS
    fd: str = ""  # the file descriptor written before the operator ("2" in 2>&1)
    target: str = ""  # the word after it (the delimiter for a here-document)
    body: str | None = None  # a here-document's body or a here-string's text

    @property
    def writes_file(self) -> bool:
        """Output sent to a file (not to another descriptor, not to /dev/null, not stderr)."""
        if self.op not in (">", ">>", ">|", "&>", "&>>"):
            return False
        if self.fd and self.fd != "1":
            return False
        t = self.target
        return bool(t) and not t.startswith("&") and t != "/dev/null"

    @property
    def feeds_stdin(self) -> bool:
        return self.op in ("<<", "<<-", "<<<")


@dataclass
class Command:
    words: list[str] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)

    @property
    def stdin_text(self) -> str | None:
        """The text of its here-documents / here-strings, joined (None when it has none)."""
        parts = [r.body or "" for r in self.redirects if r.feeds_stdin]
        return "\n".join(parts) if parts else None

    @property
    def writes_file(self) -> bool:
        return any(r.writes_file for r in self.redirects)

    @property
    def empty(self) -> bool:
        return not self.words and not self.redirects


@dataclass
class Pipeline:
    commands: list[Command] = field(default_factory=list)
    #: it begins with ``| …`` right after a ``( … )`` group: its first command reads the
    #: group's output, like a later stage of a pipeline
    continues_group: bool = False


@dataclass
class _Word:
    text: str


@dataclass
class _Op:
    op: str


class _Lexer:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.tokens: list[_Word | _Op | Redirect] = []
        self.buf: list[str] = []
        self.in_word = False
        self.pending_heredocs: list[Redirect] = []
        self.want_target: Redirect | None = None

    # --- helpers -------------------------------------------------------------------------
    def _end_word(self) -> None:
        if not self.in_word:
            return
        text = "".join(self.buf)
        self.buf, self.in_word = [], False
        if self.want_target is not None:
            r = self.want_target
            r.target = text
            self.want_target = None
            if r.op in ("<<", "<<-"):
                self.pending_heredocs.append(r)
            elif r.op == "<<<":
                r.body = text
            return
        self.tokens.append(_Word(text))

    def _read_until_quote(self, quote: str) -> str:
        """After an opening quote: the quoted text, the closing quote consumed."""
        s, out = self.s, []
        while self.i < len(s):
            c = s[self.i]
            if c == quote:
                self.i += 1
                return "".join(out)
            if quote == '"' and c == "\\" and self.i + 1 < len(s) and s[self.i + 1] in '"\\$`\n':
                if s[self.i + 1] != "\n":
                    out.append(s[self.i + 1])
                self.i += 2
                continue
            if quote == '"' and s.startswith("$(", self.i):
                out.append(self._read_balanced())
                continue
            out.append(c)
            self.i += 1
        return "".join(out)  # unterminated: the rest

    def _read_balanced(self) -> str:
        """At ``$(``: the whole ``$(…)`` text, nesting and quotes respected."""
        s, start = self.s, self.i
        self.i += 2
        depth = 1
        while self.i < len(s) and depth:
            c = s[self.i]
            if c in "'\"":
                self.i += 1
                self._read_until_quote(c)
                continue
            if c == "\\":
                self.i += 2
                continue
            if c == "(":
                depth += 1
            elif c == ")":
                depth -= 1
            self.i += 1
        return s[start : self.i]

    def _read_heredoc_bodies(self) -> None:
        s = self.s
        for r in self.pending_heredocs:
            delim = r.target
            lines: list[str] = []
            while self.i < len(s):
                end = s.find("\n", self.i)
                line = s[self.i :] if end < 0 else s[self.i : end]
                self.i = len(s) if end < 0 else end + 1
                if line.strip() == delim:
                    break
                lines.append(line)
            r.body = "\n".join(lines)
        self.pending_heredocs = []

    # --- main loop -----------------------------------------------------------------------
    def run(self) -> list[_Word | _Op | Redirect]:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c == "\\":
                if self.i + 1 < len(s) and s[self.i + 1] == "\n":  # line continuation
                    self.i += 2
                    continue
                self.in_word = True
                if self.i + 1 < len(s):
                    self.buf.append(s[self.i + 1])
                self.i += 2
                continue
            if c in " \t\r":
                self._end_word()
                self.i += 1
                continue
            if c in "'\"":
                self.in_word = True
                self.i += 1
                self.buf.append(self._read_until_quote(c))
                continue
            if c == "`":
                self.in_word = True
                end = s.find("`", self.i + 1)
                end = len(s) - 1 if end < 0 else end
                self.buf.append(s[self.i : end + 1])
                self.i = end + 1
                continue
            if s.startswith("$(", self.i):
                self.in_word = True
                self.buf.append(self._read_balanced())
                continue
            if c == "#" and not self.in_word:
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
                continue
            op = next((o for o in _OPERATORS if s.startswith(o, self.i)), None)
            if op is None or (op == "(" and self.in_word):
                self.in_word = True
                self.buf.append(c)
                self.i += 1
                continue
            if op in REDIRECTIONS:
                fd = ""
                if self.in_word and self.buf and "".join(self.buf).isdigit():
                    fd = "".join(self.buf)
                    self.buf, self.in_word = [], False
                else:
                    self._end_word()
                r = Redirect(op, fd)
                self.tokens.append(r)
                self.want_target = r
                self.i += len(op)
                continue
            self._end_word()
            self.want_target = None
            self.tokens.append(_Op(op))
            self.i += len(op)
            if op == "\n" and self.pending_heredocs:
                self._read_heredoc_bodies()
        self._end_word()
        for r in self.pending_heredocs:  # a here-document with no newline after it
            r.body = ""
        return self.tokens


def parse(text: str) -> list[Pipeline]:
    """The pipelines of a command line, in order; empty commands dropped."""
    pipelines: list[Pipeline] = []
    current = Pipeline()
    cmd = Command()

    def end_command() -> None:
        nonlocal cmd
        if not cmd.empty:
            current.commands.append(cmd)
        cmd = Command()

    def end_pipeline() -> None:
        nonlocal current
        end_command()
        if current.commands:
            pipelines.append(current)
        current = Pipeline()

    after_group = False
    for tok in _Lexer(text).run():
        if after_group:
            after_group = False
            if isinstance(tok, Redirect):  # ( … ) 2>&1: a redirection of the whole group
                after_group = True
                continue
            if isinstance(tok, _Op) and tok.op in PIPE_OPERATORS:
                current.continues_group = True
                continue
        if isinstance(tok, _Word):
            cmd.words.append(tok.text)
        elif isinstance(tok, Redirect):
            cmd.redirects.append(tok)
        elif tok.op in PIPE_OPERATORS:
            end_command()
        elif tok.op in GROUP_OPERATORS:
            end_pipeline()
            after_group = tok.op == ")"
        else:
            end_pipeline()
    end_pipeline()
    return pipelines
