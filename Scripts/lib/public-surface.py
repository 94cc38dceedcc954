#!/usr/bin/env python3
"""Counts the public declarations of each Swift module under Sources/ (Scripts/public-surface).

    public-surface.py ROOT                 a table: module, public declarations
    public-surface.py ROOT --list MODULE   that module's public declarations, `path:line: text`

A declaration is public by the rules of Scripts/lib/doc-coverage.py (whose parser this uses):
it says `public` or `open`, or it is public without saying so (a case of a public enum, a
requirement of a public protocol, a member of a `public extension`); `case a, b` counts once and
`extension` lines are not declarations. A `package` declaration is not public. Each module is
read on its own, so an extension of a type another module declares counts where it is written.
Modules without Swift sources (the C shims) are left out. Standard library only.
"""

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location('doc_coverage', os.path.join(HERE, 'doc-coverage.py'))
doc_coverage = importlib.util.module_from_spec(spec)
spec.loader.exec_module(doc_coverage)


def swift_files(top):
    paths = []
    for root, subdirs, files in os.walk(top):
        subdirs.sort()
        paths += [os.path.join(root, f) for f in sorted(files) if f.endswith('.swift')]
    return paths


def public_declarations(top):
    """[(path, 0-based line)] of the module's public declarations, in file order."""
    paths = swift_files(top)
    public_types, other_types = set(), set()
    for path in paths:
        for _, keyword, name, _, public in doc_coverage.declarations(path):
            if keyword in doc_coverage.TYPE_KEYWORDS:
                (public_types if public else other_types).add(name)
    hidden = frozenset(other_types - public_types)
    found = []
    for path in paths:
        for line, _, _, _, public in doc_coverage.declarations(path, hidden):
            if public:
                found.append((path, line))
    return found


def main(argv):
    if not argv:
        sys.exit(__doc__.split('\n\n')[1])
    root = argv[0]
    sources = os.path.join(root, 'Sources')
    modules = sorted(m for m in os.listdir(sources)
                     if os.path.isdir(os.path.join(sources, m)) and swift_files(os.path.join(sources, m)))
    if len(argv) == 3 and argv[1] == '--list':
        if argv[2] not in modules:
            sys.exit(f'public-surface: no Swift module {argv[2]} under Sources/ ({", ".join(modules)})')
        top = os.path.join(sources, argv[2])
        cache = {}
        for path, line in public_declarations(top):
            if path not in cache:
                cache[path] = open(path, encoding='utf-8').read().split('\n')
            print(f'{os.path.relpath(path, root)}:{line + 1}: {cache[path][line].strip()}')
        return 0
    if len(argv) != 1:
        sys.exit(__doc__.split('\n\n')[1])
    width = max(len(m) for m in modules)
    total = 0
    for m in modules:
        count = len(public_declarations(os.path.join(sources, m)))
        total += count
        print(f'{m:<{width}}  {count:>5}')
    print(f'{"total":<{width}}  {total:>5}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
