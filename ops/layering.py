#!/usr/bin/env python3
"""The server's layering check: every `crate::` path in server/src must point down its floors.

The floors are written once, in server/LAYERS.md (its table of floors and its list of known
upward imports); this script reads them from there. Each .rs file under server/src belongs to
the module its path names (`group/state.rs` is `group::state`, `group/mod.rs` is `group`,
an inline `mod tests { .. }` extends it). Each path it names (`crate::a::b`, `super::x`,
`self::y`, and `rill_server::a` in main.rs; `use` trees are expanded) is an arrow from the
longest listed entry that holds the file to the longest listed entry that holds the path.
An arrow is *upward* when it goes to a higher floor.

    ops/layering.py                 # the check (test.sh): fails on an upward arrow not listed
                                    # as known in LAYERS.md, and on a listed one that is gone
    ops/layering.py --report        # entries, files, arrows, upward arrows and mutual pairs
    ops/layering.py --report --top  # the same counted between top-level modules only
    ops/layering.py --report --tree DIR  # another checkout's server/src against these floors
                                    # (the baseline: git worktree add DIR 667432d)

Exit status: 0 when the tree keeps the layering, 1 when it does not (the offending arrows,
each with a file that makes it, are printed).
"""
import argparse
import os
import re
import signal
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "server", "src")
LAYERS = os.path.join(ROOT, "server", "LAYERS.md")


def read_layers(path):
    """Floors ({entry: floor}) and known upward arrows ({(from, to)}) from LAYERS.md.

    A floor is a table row `| N | name | a, b::c, ... | what |`; a known upward arrow is a
    list item `- from -> to` under the heading "Known upward imports".
    """
    floors, known, in_known = {}, set(), False
    for line in open(path, encoding="utf-8"):
        row = re.match(r"\|\s*(\d+)\s*\|[^|]*\|([^|]*)\|", line)
        if row:
            for entry in row.group(2).replace("`", "").split(","):
                entry = entry.strip()
                if entry:
                    assert entry not in floors, f"{entry} is listed twice"
                    floors[entry] = int(row.group(1))
            continue
        if line.startswith("#"):
            in_known = "Known upward imports" in line
        arrow = re.match(r"-\s*`?([\w:]+)`?\s*->\s*`?([\w:]+)`?", line)
        if in_known and arrow:
            known.add((arrow.group(1), arrow.group(2)))
    return floors, known


def strip(text):
    """The code only: comments, strings and char literals blanked (offsets kept)."""
    out = re.sub(r"/\*.*?\*/", lambda m: " " * len(m.group(0)), text, flags=re.S)
    out = re.sub(r"//[^\n]*", lambda m: " " * len(m.group(0)), out)
    out = re.sub(r'r#*"(.|\n)*?"#*|"(\\.|[^"\\])*"', lambda m: re.sub(r"[^\n]", " ", m.group(0)), out)
    return re.sub(r"'(\\.|[^'\\])'", "' '", out)


def module_of(rel):
    """`group/state.rs` -> ["group", "state"]; `group/mod.rs` -> ["group"]."""
    parts = rel[:-3].split("/")
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return parts if parts != ["main"] else ["main"]


def inline_modules(code):
    """(start, end, name) of each inline `mod name { .. }` block."""
    spans = []
    for m in re.finditer(r"\bmod\s+(\w+)\s*\{", code):
        depth, i = 1, m.end()
        while i < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[i], 0)
            i += 1
        spans.append((m.start(), i, m.group(1)))
    return spans


def use_tree(code, i):
    """Paths (lists of segments) of the use tree or path starting at code[i]."""
    paths, seg = [], []
    while i < len(code):
        m = re.match(r"\s*(\w+)\s*", code[i:])
        if m and code[i + m.end():i + m.end() + 2] == "::":
            seg.append(m.group(1))
            i += m.end() + 2
            continue
        m2 = re.match(r"\s*\{", code[i:])
        if m2:
            depth, j = 1, i + m2.end()
            start = j
            items, k = [], j
            while j < len(code) and depth:
                c = code[j]
                if c == "{":
                    depth += 1
                elif c == "}":
                    depth -= 1
                if (c == "," and depth == 1) or depth == 0:
                    items.append(code[k:j])
                    k = j + 1
                j += 1
            del start
            for item in items:
                for sub in use_tree(item, 0) or [[]]:
                    paths.append(seg + sub)
            return paths
        if m:
            paths.append(seg + [m.group(1)])
        else:
            paths.append(seg)
        return paths
    return [seg]


def arrows_of(rel, text):
    """(path the file's code names, resolved from the crate root) for every path it names."""
    code = strip(text)
    base = module_of(rel)
    spans = inline_modules(code)
    root = r"rill_server" if base == ["main"] else r"crate"
    for m in re.finditer(r"(?<![\w:])(%s|super|self)::" % root, code):
        here = base + [name for (s, e, name) in spans if s < m.start() < e]
        kind = m.group(1)
        for path in use_tree(code, m.end()):
            if path and path[0] == "self":
                path = path[1:]
            if kind == "super":
                up = here[:-1]
                while path and path[0] == "super":
                    up, path = up[:-1], path[1:]
                full = up + path
            elif kind == "self":
                full = here + path
            else:
                full = path
            if full:
                yield full


def entry_of(path, floors):
    """The longest listed entry holding `path` (a list of segments), or None."""
    for n in range(len(path), 0, -1):
        name = "::".join(path[:n])
        if name in floors:
            return name
    return None


def collect(floors, top, src=SRC):
    """{(from, to): first file making the arrow}, and the number of files read."""
    arrows, files = {}, 0
    for d, _, names in sorted(os.walk(src)):
        for f in sorted(names):
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(d, f), src)
            files += 1
            mod = module_of(rel)
            if mod == []:
                continue  # lib.rs: the map, no code
            src_entry = mod[0] if top else entry_of(mod, floors)
            assert src_entry, f"{rel}: no floor in LAYERS.md holds {'::'.join(mod)}"
            for path in arrows_of(rel, open(os.path.join(d, f), encoding="utf-8").read()):
                dst = path[0] if top else entry_of(path, floors)
                if dst is None or dst == src_entry or (top and dst not in tops(floors)):
                    continue
                arrows.setdefault((src_entry, dst), rel)
    return arrows, files


def tops(floors):
    return {e.split("::")[0] for e in floors}


def top_floor(entry, floors):
    """A top-level module's floor: its own entry's (the part that is the rest of it)."""
    return floors.get(entry, min(f for e, f in floors.items() if e.split("::")[0] == entry))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report", action="store_true", help="print the counts and every upward arrow")
    ap.add_argument("--top", action="store_true", help="count between top-level modules only")
    ap.add_argument("--tree", help="measure this checkout's server/src (default: this one's)")
    args = ap.parse_args()
    floors, known = read_layers(LAYERS)
    src = os.path.join(args.tree, "server", "src") if args.tree else SRC
    arrows, files = collect(floors, args.top, src)
    floor = (lambda e: top_floor(e, floors)) if args.top else floors.get
    up = {a: f for a, f in arrows.items() if floor(a[1]) > floor(a[0])}
    mutual = {tuple(sorted(a)) for a in arrows if (a[1], a[0]) in arrows}
    if args.report:
        entries = tops(floors) if args.top else floors
        print(f"{files} files, {len(entries)} entries on {len(set(floors.values()))} floors, "
              f"{len(arrows)} arrows, {len(up)} upward, {len(mutual)} mutual pairs")
        for (a, b), f in sorted(up.items()):
            print(f"  up  {a} ({floor(a)}) -> {b} ({floor(b)})   e.g. {f}")
        return 0
    new = {a: f for a, f in up.items() if a not in known}
    gone = known - set(up)
    for (a, b), f in sorted(new.items()):
        print(f"layering: {a} (floor {floors[a]}) imports {b} (floor {floors[b]}), e.g. in server/src/{f}")
    for a, b in sorted(gone):
        print(f"layering: {a} -> {b} is listed as a known upward import in server/LAYERS.md but is gone: strike it")
    if new or gone:
        return 1
    print(f"layering: {files} files, {len(arrows)} arrows between {len(floors)} entries, "
          f"{len(up)} upward (all known, server/LAYERS.md)")
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the report quietly
    sys.exit(main())
