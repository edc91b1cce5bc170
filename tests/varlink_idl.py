"""A strict parser for Varlink's interface definition language, in plain
Python, written from the grammar of the Varlink specification.

It checks the .varlink files kept in the repository (and what servers return
from GetInterfaceDescription): every member well formed, every named type
defined, no name defined twice.  parse() returns
{"name": ..., "types": {...}, "methods": {...}, "errors": {...}} or raises
IdlError with line:column.
"""
import re

_TOKEN = re.compile(r"\s+|#[^\n]*|->|\[\]|\[string\]|[A-Za-z][A-Za-z0-9_.\-]*|[():,?]")
_IFACE = re.compile(r"^[A-Za-z]([-]*[A-Za-z0-9])*(\.[A-Za-z0-9]([-]*[A-Za-z0-9])*)+$")
_MEMBER = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_FIELD = re.compile(r"^[A-Za-z](_?[A-Za-z0-9])*$")
_BUILTIN = {"bool", "int", "float", "string", "object"}


class IdlError(Exception):
    pass


def _tokens(text):
    pos, out = 0, []
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise IdlError("%s: unexpected character %r" % (_where(text, pos), text[pos]))
        if not m.group().isspace() and not m.group().startswith("#"):
            out.append((m.group(), pos))
        pos = m.end()
    out.append(("", pos))
    return out


def _where(text, pos):
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return "%d:%d" % (line, col)


class _Parser:
    def __init__(self, text):
        self.text, self.toks, self.i = text, _tokens(text), 0
        self.used = []  # (type name, position) of every named type used

    def peek(self, k=0):
        return self.toks[self.i + k][0]

    def fail(self, what):
        tok, pos = self.toks[self.i]
        raise IdlError("%s: expected %s, found %r" % (_where(self.text, pos), what, tok or "end"))

    def take(self, want=None, pattern=None, what=None):
        tok = self.peek()
        if (want is not None and tok != want) or (pattern is not None and not pattern.match(tok)):
            self.fail(what or repr(want))
        self.i += 1
        return tok

    def type_(self, nullable_ok=True):
        if self.peek() == "?":
            if not nullable_ok:
                self.fail("a type (no '?' twice)")
            self.take("?")
            return "?" + self.type_(False)
        if self.peek() in ("[]", "[string]"):
            return self.take() + self.type_()
        if self.peek() == "(":
            return self.struct_or_enum()
        if self.peek() in _BUILTIN:
            return self.take()
        pos = self.toks[self.i][1]
        name = self.take(pattern=_MEMBER, what="a type")
        self.used.append((name, pos))
        return name

    def struct_or_enum(self):
        self.take("(")
        if self.peek() == ")":
            self.take(")")
            return "()"
        if self.peek(1) in (",", ")"):  # an enum: names only
            names = [self.take(pattern=_FIELD, what="an enum value")]
            while self.peek() == ",":
                self.take(",")
                names.append(self.take(pattern=_FIELD, what="an enum value"))
            self.take(")")
            if len(set(names)) != len(names):
                self.fail("distinct enum values")
            return "(" + ", ".join(names) + ")"
        fields = []
        while True:
            name = self.take(pattern=_FIELD, what="a field name")
            if name in [f for f, _ in fields]:
                self.i -= 1
                self.fail("a field name not used before in this struct")
            self.take(":")
            fields.append((name, self.type_()))
            if self.peek() != ",":
                break
            self.take(",")
        self.take(")")
        return "(" + ", ".join("%s: %s" % f for f in fields) + ")"

    def struct(self):
        if self.peek() != "(":
            self.fail("'('")
        s = self.struct_or_enum()
        if s != "()" and ":" not in s:
            self.i -= 1
            self.fail("a struct, not an enum")
        return s

    def interface(self):
        self.take("interface")
        name = self.take(pattern=_IFACE, what="an interface name")
        out = {"name": name, "types": {}, "methods": {}, "errors": {}}
        while self.peek():
            kind = self.take(pattern=re.compile("^(type|method|error)$"),
                             what="'type', 'method' or 'error'")
            member = self.take(pattern=_MEMBER, what="a member name")
            if any(member in out[k] for k in ("types", "methods", "errors")):
                self.i -= 1
                self.fail("a name not defined before")
            if kind == "type":
                out["types"][member] = self.struct_or_enum()
            elif kind == "error":
                out["errors"][member] = self.struct()
            else:
                args = self.struct()
                self.take("->")
                out["methods"][member] = (args, self.struct())
        if not out["methods"]:
            raise IdlError("%s: an interface needs at least one method" % name)
        for used, pos in self.used:
            if used not in out["types"]:
                raise IdlError("%s: type %s is not defined" % (_where(self.text, pos), used))
        return out


def parse(text):
    return _Parser(text).interface()
