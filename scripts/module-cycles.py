#!/usr/bin/env python3
"""Finds import cycles between the modules of a Rust crate's `src/` tree.

    scripts/module-cycles.py broker/src operator/src ...

Every `.rs` file is a module (`foo/mod.rs` is `foo`). A module depends on another when its
text names a path into it: `crate::a::b::Item`, `super::x::Item`, `self::x` or a `use` group
such as `crate::a::{b, c}`. Test-only code (`#[cfg(test)]` modules, written inline or declared
as `#[cfg(test)] mod x;` with their files and everything below them, and files under a `tests/`
folder) is ignored, as are `mod` declarations and the parent's re-exports of
its own children (`pub use child::X` in `mod.rs`), which every Rust module tree has.

A cycle is reported among siblings: at each folder, the children are folded into one node each
(with everything below them), and a cycle between two or more of them is printed. That is the
level at which "server imports cluster and cluster imports server" is a cycle. Exits 1 when a
cycle is found, 0 otherwise.
"""
import os
import re
import sys

# `#[cfg(test)] mod x;` (possibly `pub(crate)`, possibly with other attributes between).
TEST_MOD_RE = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")
PATH_RE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)(::\{([^;]*?)\})?")


def strip_tests(text):
    """Drops inline `#[cfg(test)] mod x { ... }` blocks and comments."""
    text = re.sub(r"//[^\n]*", "", text)
    out, i = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j
    out.append(text[i:])
    return "".join(out)


def modules(src):
    mods = {}
    for root, dirs, files in os.walk(src):
        rel = os.path.relpath(root, src)
        parts = [] if rel == "." else rel.split(os.sep)
        if "tests" in parts:
            continue
        for f in files:
            if not f.endswith(".rs"):
                continue
            name = f[:-3]
            if not parts and name in ("lib", "main"):
                path = ()
            elif name == "mod":
                path = tuple(parts)
            else:
                path = tuple(parts + [name])
            mods[path] = os.path.join(root, f)
    test_only = set()
    for path, file in mods.items():
        text = re.sub(r"//[^\n]*", "", open(file, encoding="utf-8").read())
        for m in TEST_MOD_RE.finditer(text):
            test_only.add(path + (m.group(1),))
    return {
        path: file
        for path, file in mods.items()
        if not any(path[:k] in test_only for k in range(1, len(path) + 1))
    }


def resolve(mods, base, segs):
    """Longest module prefix of base+segs."""
    full = tuple(base) + tuple(segs)
    for k in range(len(full), -1, -1):
        if full[:k] in mods:
            return full[:k]
    return None


def edges(mods):
    out = {m: set() for m in mods}
    for mod, file in mods.items():
        text = strip_tests(open(file, encoding="utf-8").read())
        is_dir_mod = file.endswith("mod.rs") or file.endswith("lib.rs") or file.endswith("main.rs")
        here = mod if is_dir_mod else mod  # module path of this file
        parent_scope = mod[:-1]
        for m in PATH_RE.finditer(text):
            kind, rest, group = m.group(1), m.group(2), m.group(4)
            segs = [s for s in rest.split("::") if s]
            if kind == "crate":
                base = ()
            elif kind == "self":
                base = here
            else:  # super: may repeat, e.g. super::super::x
                base = parent_scope
                while segs and segs[0] == "super":
                    base = base[:-1]
                    segs = segs[1:]
            targets = []
            if group:
                for item in re.split(r",", group):
                    item = item.strip().split(" as ")[0].strip()
                    if not item or item.startswith("{"):
                        continue
                    targets.append(segs + [s for s in item.split("::") if s and s != "self"])
            else:
                targets.append(segs)
            for t in targets:
                r = resolve(mods, base, t)
                if r is None or r == mod:
                    continue
                # A parent naming its own child (re-export or use) is the tree itself.
                if r[: len(mod)] == mod:
                    continue
                out[mod].add(r)
    return out


def cycles(mods, deps):
    found = []
    folders = {m[:-1] for m in mods if m} | {()}
    for folder in sorted(folders):
        kids = sorted({m[len(folder)] for m in mods if len(m) > len(folder) and m[: len(folder)] == folder})
        graph = {k: set() for k in kids}
        for a, bs in deps.items():
            if len(a) <= len(folder) or a[: len(folder)] != folder:
                continue
            for b in bs:
                if len(b) <= len(folder) or b[: len(folder)] != folder:
                    continue
                ka, kb = a[len(folder)], b[len(folder)]
                if ka != kb:
                    graph[ka].add(kb)
        # Tarjan's strongly connected components.
        index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]

        def visit(v):
            index[v] = low[v] = n[0]
            n[0] += 1
            stack.append(v)
            on.add(v)
            for w in graph[v]:
                if w not in index:
                    visit(w)
                    low[v] = min(low[v], low[w])
                elif w in on:
                    low[v] = min(low[v], index[w])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))

        for k in kids:
            if k not in index:
                visit(k)
        for comp in comps:
            prefix = "::".join(folder)
            found.append((prefix or "crate", comp, graph))
    return found


def main():
    sys.setrecursionlimit(10000)
    bad = 0
    for src in sys.argv[1:]:
        mods = modules(src)
        deps = edges(mods)
        for folder, comp, graph in cycles(mods, deps):
            bad += 1
            links = [f"{a}->{b}" for a in comp for b in sorted(graph[a]) if b in comp]
            print(f"{src}: cycle in {folder}: {', '.join(comp)} ({'; '.join(links)})")
        if not any(True for _ in cycles(mods, deps)):
            print(f"{src}: no module cycles ({len(mods)} modules)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
