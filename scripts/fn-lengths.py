#!/usr/bin/env python3
"""Function lengths of the workspace's library and binary code, in lines from `fn` to its
closing brace (tests left out: every `#[cfg(test)]` item, wherever it stands in the file, and
`src/tests.rs` files). The tidy test `cargo test -p prod-tidy` keeps the same count as a rule.

Usage:
  python3 scripts/fn-lengths.py [--top N]     the N longest functions of each crate (default 3)
  python3 scripts/fn-lengths.py --over N      every function longer than N lines, longest first

A rough lexical count (comments and string literals are skipped when matching braces), good
enough to find the functions that no longer fit on a screen.
"""
import glob
import os
import re
import sys

FN = re.compile(r'^\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?fn\s+(\w+)')


def code_of(line):
    line = re.sub(r'//.*', '', line)
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    return re.sub(r"'(\\.|[^'\\])'", "''", line)


def without_test_items(lines):
    """The lines with every `#[cfg(test)]` item blanked (the attribute, then the item up to its
    closing brace or semicolon)."""
    out = list(lines)
    i = 0
    while i < len(out):
        if out[i].strip().startswith('#[cfg(test)]'):
            depth, j = 0, i
            while j < len(out):
                code = code_of(out[j])
                done = False
                for ch in code:
                    if ch == '{':
                        depth += 1
                    elif ch == '}':
                        depth -= 1
                        if depth == 0:
                            done = True
                            break
                    elif ch == ';' and depth == 0 and j > i:
                        done = True
                        break
                out[j] = ''
                if done:
                    break
                j += 1
            i = j
        i += 1
    return out


def functions(path):
    lines = without_test_items(open(path, encoding='utf-8').read().split('\n'))
    end = len(lines)
    i = 0
    while i < end:
        m = FN.match(lines[i])
        if m:
            depth, started, j = 0, False, i
            while j < end:
                code = code_of(lines[j])
                for ch in code:
                    if ch == '{':
                        depth, started = depth + 1, True
                    elif ch == '}':
                        depth -= 1
                if started and depth == 0:
                    break
                if not started and code.rstrip().endswith(';'):
                    break
                j += 1
            if started:
                yield j - i + 1, m.group(6)
        i += 1


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), '..')
    args = sys.argv[1:]
    over = int(args[args.index('--over') + 1]) if '--over' in args else None
    top = int(args[args.index('--top') + 1]) if '--top' in args else 3
    found = []
    for f in sorted(glob.glob(os.path.join(root, 'crates/*/src/**/*.rs'), recursive=True)):
        if os.path.basename(f) == 'tests.rs':
            continue
        crate = f.split('/crates/')[1].split('/')[0]
        rel = f.split('/src/', 1)[1]
        found += [(n, name, crate, rel) for n, name in functions(f)]
    found.sort(key=lambda t: (-t[0], t[2], t[1]))
    if over is not None:
        for n, name, crate, rel in (t for t in found if t[0] > over):
            print(f"{n:4} {crate} {name} ({rel})")
        return
    for crate in sorted({t[2] for t in found}):
        longest = [t for t in found if t[2] == crate][:top]
        print(f"{crate}: " + ", ".join(f"{n} {name} ({rel})" for n, name, _, rel in longest))


if __name__ == '__main__':
    main()
