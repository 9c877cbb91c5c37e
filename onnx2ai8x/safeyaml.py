"""Bounds on a YAML document, checked on its event stream before anything is built.

A sidecar or QAT policy is a few kilobytes, a few levels deep, with at most a handful of
anchors. PyYAML trusts its input: libyaml composes nested collections recursively (a few
thousand `[` end in a segmentation fault), and aliases are shared when composed but
expanded by every consumer that walks the result (the "billion laughs" document, also
through merge keys `<<: *a`, grows without bound). The parser itself is iterative, so one
pass over its events measures the nesting depth and the size of the document with every
alias expanded, and refuses a document beyond the limits before a node is composed.
"""
from __future__ import annotations

import yaml

from .errors import Ai8xError

# A vendor network description is a mapping of lists of mappings (depth 3-4); QAT
# policies and the import-izer's files are flatter. 64 levels leave room for any hand
# formatting while staying far from the C stack.
MAX_DEPTH = 64
# The largest zoo sidecar has ~1,500 scalars; 100,000 nodes with aliases expanded is
# still a few milliseconds to build, and a bomb stops at the first anchor past it.
MAX_EXPANDED_NODES = 100_000
# The text itself: a description of at most 128 layers is well under a megabyte.
MAX_BYTES = 4 << 20

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _fail(source: str, line: int | None, message: str, hint: str) -> Ai8xError:
    where = f"{source}: line {line + 1}" if line is not None else source
    return Ai8xError("yaml.limits", where, message, hint)


def check_bounds(text: str, source: str) -> None:
    """Raise Ai8xError (naming `source` and the line) when `text` nests deeper than
    MAX_DEPTH, expands to more than MAX_EXPANDED_NODES nodes through aliases, or is
    longer than MAX_BYTES. Syntax errors are left to the loader, which reports them."""
    if len(text) > MAX_BYTES:
        raise _fail(source, None, f"the YAML text is {len(text)} characters long, more "
                    f"than the {MAX_BYTES} a network description can need",
                    "pass the network description, not another file")
    # Per open collection: [anchor or None, its size so far with aliases expanded];
    # the sizes of finished anchored nodes by anchor name.
    stack: list[list] = []
    anchors: dict[str, int] = {}
    try:
        for event in yaml.parse(text, Loader=_Loader):
            line = event.start_mark.line if event.start_mark is not None else None
            if isinstance(event, yaml.CollectionStartEvent):
                if len(stack) >= MAX_DEPTH:
                    raise _fail(source, line, f"the YAML nests more than {MAX_DEPTH} levels "
                                "deep", "a network description is a mapping of lists "
                                "of mappings; remove the extra brackets")
                stack.append([event.anchor, 1])
                continue
            if isinstance(event, yaml.CollectionEndEvent):
                anchor, size = stack.pop()
                if anchor is not None:
                    anchors[anchor] = size
            elif isinstance(event, yaml.ScalarEvent):
                size = 1
                if event.anchor is not None:
                    anchors[event.anchor] = 1
            elif isinstance(event, yaml.AliasEvent):
                size = anchors.get(event.anchor, 1)
            else:
                continue
            if stack:
                stack[-1][1] += size
                size = stack[-1][1]
            if size > MAX_EXPANDED_NODES:
                raise _fail(source, line, "the YAML expands to more than "
                            f"{MAX_EXPANDED_NODES} values (through aliases `*name`, "
                            "or it is simply that large)",
                            "write the values out instead of nesting aliases")
    except yaml.YAMLError:
        return  # the loader reports the syntax error with its position


__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_EXPANDED_NODES", "check_bounds"]
