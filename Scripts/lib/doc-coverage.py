#!/usr/bin/env python3
"""Lists the public declarations of Swift sources that have no doc comment (Scripts/doc-coverage).

    doc-coverage.py DIR...

A declaration is public when it says `public` or `open`, or when it is public without saying so:
a case of a public enum, a requirement of a public protocol, a member of a `public extension`
that names no access level. A member that says `public` inside a type that is not public, or in
an extension of a type these sources declare without `public`, is not (Swift makes it no more
visible than its type). `extension` lines are not declarations here.
Every such declaration needs its own `///` (or `/** */`) comment on the line right above it or
above its attributes; a `case a, b` counts once. Each one without prints as `path:line: text`
(the line of its keyword), then the count; the exit status is 1 when the count is not 0.

The sources are read with a small lexer (comments, nested block comments, string literals with
interpolation, multi-line and raw strings), so a string or a comment that says `public func` is
not a declaration and a declaration written over several lines is still one. Standard library
only (Debian's /usr/bin/python3).
"""

import os
import re
import sys

DECL_KEYWORDS = {
    'func', 'var', 'let', 'init', 'struct', 'class', 'enum', 'case', 'protocol', 'typealias',
    'associatedtype', 'subscript', 'actor', 'extension', 'macro',
}
TYPE_KEYWORDS = {'struct', 'class', 'enum', 'protocol', 'actor', 'extension'}
ACCESS = {'public', 'open', 'package', 'internal', 'fileprivate', 'private'}
MODIFIERS = ACCESS | {
    'static', 'class', 'final', 'override', 'nonisolated', 'mutating', 'nonmutating', 'convenience',
    'required', 'indirect', 'lazy', 'weak', 'unowned', 'dynamic', 'optional', 'prefix', 'postfix',
    'infix', 'distributed', 'consuming', 'borrowing',
}


def clean(text):
    """The source with every comment and the inside of every string literal blanked out (line
    breaks kept, so line numbers hold), and the set of 0-based lines that hold a doc comment and
    no code."""
    out = list(text)
    n = len(text)
    line = 0
    doc_lines, code_lines = set(), set()

    def blank(a, b):
        for k in range(a, b):
            if out[k] != '\n':
                out[k] = ' '

    def skip_string(i):
        """i is at the opening delimiter (after any #s); returns the index after the closing one."""
        nonlocal line
        h = 0
        while text[i] == '#':
            h += 1
            i += 1
        multi = text.startswith('"""', i)
        i += 3 if multi else 1
        close = ('"""' if multi else '"') + '#' * h
        escape = '\\' + '#' * h
        while i < n:
            c = text[i]
            if c == '\n':
                line += 1
                i += 1
                continue
            code_lines.add(line)
            if text.startswith(close, i):
                return i + len(close)
            if text.startswith(escape, i):
                i += len(escape)
                if i < n and text[i] == '(':
                    i = skip_code(i + 1, interpolation=True)
                elif i < n and text[i] == '\n':
                    pass
                else:
                    i += 1
                continue
            i += 1
        return i

    def skip_code(i, interpolation=False):
        """Code from i (to the end, or to the `)` that closes an interpolation); returns the index
        after it. Comments inside are recorded and blanked."""
        nonlocal line
        depth = 1
        while i < n:
            c = text[i]
            if c == '\n':
                line += 1
                i += 1
            elif text.startswith('//', i):
                j = text.find('\n', i)
                j = n if j < 0 else j
                if text.startswith('///', i) and not text.startswith('////', i):
                    doc_lines.add(line)
                blank(i, j)
                i = j
            elif text.startswith('/*', i):
                is_doc = text.startswith('/**', i) and not text.startswith('/**/', i)
                start, nest, i = i, 1, i + 2
                while i < n and nest:
                    if is_doc:
                        doc_lines.add(line)
                    if text[i] == '\n':
                        line += 1
                        i += 1
                    elif text.startswith('/*', i):
                        nest, i = nest + 1, i + 2
                    elif text.startswith('*/', i):
                        nest, i = nest - 1, i + 2
                    else:
                        i += 1
                if is_doc:
                    doc_lines.add(line)
                blank(start, i)
            elif c == '"' or (c == '#' and re.match(r'#+"', text[i:i + 64])):
                start = i
                code_lines.add(line)
                i = skip_string(i)
                # keep the delimiters' places as code, blank what is between them
                blank(start + 1, max(start + 1, i - 1))
            else:
                if not c.isspace():
                    code_lines.add(line)
                if interpolation:
                    if c == '(':
                        depth += 1
                    elif c == ')':
                        depth -= 1
                        if depth == 0:
                            return i + 1
                i += 1
        return i

    skip_code(0)
    return ''.join(out), doc_lines - code_lines


TOKEN = re.compile(r'`[^`\n]*`|[@#]?[A-Za-z_][A-Za-z_0-9]*|\d[\w.]*|\S')


def tokens(code):
    result = []
    for number, text in enumerate(code.split('\n')):
        for m in TOKEN.finditer(text):
            result.append((m.group(0), number, m.start(), m.end()))
    return result


class Scope:
    def __init__(self, kind, public=False, default_public=False):
        self.kind = kind                      # a type keyword, 'file', 'code', '(' or '['
        self.public = public                  # its members can be public
        self.default_public = default_public  # members without an access level are public


def declarations(path, hidden_types=frozenset()):
    """Yields (line, keyword, name, documented, public) for each declaration directly in a type's
    body or at file scope. `hidden_types`: names of types declared in the sources that are not
    public, whose extensions' members are not public either."""
    text = open(path, encoding='utf-8').read()
    code, doc_lines = clean(text)
    toks = tokens(code)
    stack = [Scope('file', public=True)]
    pending = None  # the scope the next `{` opens (a type's body), else a code block
    i = 0
    while i < len(toks):
        tok, line = toks[i][0], toks[i][1]
        top = stack[-1]
        at_start = i == 0 or toks[i - 1][1] != line or toks[i - 1][0] in '{};'
        if at_start and top.kind not in ('code', '(', '['):
            decl = parse_header(toks, i)
            if decl:
                j, keyword, access, name = decl
                first_line = line
                kw_line = toks[j][1]
                if keyword == 'case' and top.kind != 'enum':
                    decl = None
                if decl:
                    if access in ('public', 'open'):
                        public = top.public
                    elif access is None:
                        public = top.public and (top.default_public
                                                 or (keyword == 'case' and top.kind == 'enum'))
                    else:
                        public = False
                    if keyword in TYPE_KEYWORDS:
                        if keyword == 'extension':
                            pending = Scope('extension', public=name.split('.')[-1] not in hidden_types,
                                            default_public=access in ('public', 'open'))
                        else:
                            pending = Scope(keyword, public=public,
                                            default_public=public and keyword == 'protocol')
                    if keyword != 'extension':
                        own_line = i == 0 or toks[i - 1][1] != line
                        documented = own_line and (first_line - 1) in doc_lines
                        yield kw_line, keyword, name, documented, public
                    i = j + 1
                    continue
        if tok == '{':
            stack.append(pending or Scope('code'))
            pending = None
        elif tok in '([':
            stack.append(Scope(tok))
        elif tok in '}])':
            if len(stack) > 1:
                stack.pop()
        i += 1


def parse_header(toks, i):
    """If a declaration starts at token i: (index of its keyword, keyword, access or None, name)."""
    access = None
    n = len(toks)
    while i < n and toks[i][0].startswith('@'):
        # an attribute, with its arguments when `(` follows it directly
        if i + 1 < n and toks[i + 1][0] == '(' and toks[i + 1][1] == toks[i][1] \
                and toks[i + 1][2] == toks[i][3]:
            i = skip_group(toks, i + 1)
        else:
            i += 1
    while i < n:
        word = toks[i][0]
        nxt = toks[i + 1][0] if i + 1 < n else ''
        if word == 'class' and nxt not in DECL_KEYWORDS and nxt not in MODIFIERS:
            break  # `class Name`: the keyword, not the modifier
        if word not in MODIFIERS:
            break
        if nxt == '(':  # private(set), nonisolated(unsafe), unowned(safe)…
            after = skip_group(toks, i + 1)
            inner = [t[0] for t in toks[i + 2:after - 1]]
            if word in ACCESS and inner != ['set']:
                return None  # not Swift we know
            i = after  # a setter's access, or an isolation: not the declaration's access
            continue
        if nxt not in MODIFIERS and nxt not in DECL_KEYWORDS and not nxt.startswith('@'):
            return None  # a name that happens to be a modifier word (`open.writer…`)
        if word in ACCESS:
            access = word
        i += 1
    if i < n and toks[i][0] in DECL_KEYWORDS:
        name = toks[i + 1][0] if i + 1 < n else ''
        k = i + 2
        while k + 1 < n and toks[k][0] == '.' and toks[k + 1][1] == toks[i][1]:
            name += '.' + toks[k + 1][0]
            k += 2
        return i, toks[i][0], access, name
    return None


def skip_group(toks, i):
    """toks[i] opens a group; returns the index after the token that closes it."""
    depth = 0
    while i < len(toks):
        if toks[i][0] in '([{':
            depth += 1
        elif toks[i][0] in ')]}':
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def main(dirs):
    paths = []
    for top in dirs:
        for root, subdirs, files in os.walk(top):
            subdirs.sort()
            paths += [os.path.join(root, f) for f in sorted(files) if f.endswith('.swift')]
    # Types these sources declare, public or not: an extension of one that is not public adds
    # nothing public (a type declared public anywhere counts as public).
    public_types, other_types = set(), set()
    for path in paths:
        for _, keyword, name, _, public in declarations(path):
            if keyword in TYPE_KEYWORDS:
                (public_types if public else other_types).add(name)
    hidden = frozenset(other_types - public_types)
    missing = total = 0
    for path in paths:
        lines = None
        for line, keyword, _, documented, public in declarations(path, hidden):
            if not public:
                continue
            total += 1
            if not documented:
                if lines is None:
                    lines = open(path, encoding='utf-8').read().split('\n')
                print(f'{path}:{line + 1}: {lines[line].strip()}')
                missing += 1
    print(f'doc-coverage: {missing} of {total} public declarations without a doc comment '
          f'({", ".join(dirs)})')
    return 1 if missing else 0


if __name__ == '__main__':
    if len(sys.argv) < 2:
        sys.exit(__doc__.split('\n\n')[1])
    sys.exit(main(sys.argv[1:]))
