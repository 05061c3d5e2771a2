"""Rewrites a CUDA source's kernel launches for the CUDA emulator.

`kernel<T, 4><<<grid, block, shared, stream>>>(a, b)` becomes
`::sbpc_emu::Launch("kernel<T, 4>", grid, block, shared, stream)(
[](auto &...a) { kernel<T, 4>(a...); }, a, b)` (a call, so that a template
kernel's arguments are deduced as in CUDA),
which cuda_runtime.h (tools/cuda-emu/include) runs on the host. Each
`__shared__` declaration is followed, on its line, by a call that makes the
variables it declares fresh (NaN) for each block:
`__shared__ float a[4], b;` gets `::sbpc_emu::sharedDeclared(&a, sizeof(a));`
and the same for b. Everything else is left as it is, and a #line directive
keeps the compiler's messages on the original file's lines.

usage: cu2cpp.py IN.cu OUT.cpp
"""
import os
import re
import sys


class LaunchError(Exception):
    pass


def matching_backwards(text, end, opening, closing):
    """The index of the `opening` that balances the `closing` at text[end]."""
    depth = 0
    for i in range(end, -1, -1):
        if text[i] == closing:
            depth += 1
        elif text[i] == opening:
            depth -= 1
            if depth == 0:
                return i
    raise LaunchError("unbalanced " + closing)


def matching_forwards(text, start, opening, closing):
    """The index just past the `closing` that balances the `opening` at text[start]."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == opening:
            depth += 1
        elif text[i] == closing:
            depth -= 1
            if depth == 0:
                return i + 1
    raise LaunchError("unbalanced " + opening)


def kernel_start(text, launch):
    """Where the kernel expression before `<<<` at `launch` begins."""
    i = launch - 1
    while i >= 0 and text[i].isspace():
        i -= 1
    if text[i] == ">":
        i = matching_backwards(text, i, "<", ">") - 1
        while i >= 0 and text[i].isspace():
            i -= 1
    end = i + 1
    while i >= 0 and (text[i].isalnum() or text[i] in "_:"):
        i -= 1
    if i + 1 == end:
        raise LaunchError("no kernel name before <<<")
    return i + 1


def line_of(text, index):
    return text.count("\n", 0, index) + 1


def masked(text):
    """`text` with its comments and string and character literals blanked
    (spaces, newlines kept), so that what they hold is never taken for code."""
    out, i, n = list(text), 0, len(text)
    while i < n:
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif text[i] in "\"'":
            end = i + 1
            while end < n and text[end] != text[i] and text[end] != "\n":
                end += 2 if text[end] == "\\" else 1
            end = min(end + 1, n)
        else:
            i += 1
            continue
        for j in range(i, end):
            if out[j] != "\n":
                out[j] = " "
        i = end
    return "".join(out)


def split_top_level(text):
    """`text` split at the commas outside brackets (and outside a template's
    <> where not inside () or [])."""
    parts, depth, angles, start = [], 0, 0, 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "<" and depth == 0:
            angles += 1
        elif c == ">" and depth == 0 and angles:
            angles -= 1
        elif c == "," and depth == 0 and angles == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def without_balanced(text, opening, closing):
    """`text` less every balanced `opening`...`closing` (a struct's body)."""
    out, depth = [], 0
    for c in text:
        if c == opening:
            depth += 1
        elif c == closing and depth:
            depth -= 1
        elif depth == 0:
            out.append(c)
    return "".join(out)


def declared_names(declaration):
    """The variables `float a[4], b` declares: ["a", "b"]."""
    declaration = re.sub(r"\[\[.*?\]\]", " ", declaration)
    declaration = re.sub(r"\b(__align__|alignas)\s*\([^)]*\)", " ", declaration)
    declaration = without_balanced(declaration, "{", "}")
    names = []
    for declarator in split_top_level(declaration):
        head = re.split(r"[\[=]", declarator, maxsplit=1)[0]
        found = re.findall(r"[A-Za-z_]\w*", head)
        if not found:
            raise LaunchError("no name in the __shared__ declaration")
        names.append(found[-1])
    return names


def statement_end(text, start):
    """The index of the `;` that ends the statement at `start`, braces skipped."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
        elif text[i] == ";" and depth == 0:
            return i
    return -1


def mark_shared(text):
    """Each `__shared__` declaration followed by sharedDeclared calls."""
    code = masked(text)
    out, done = [], 0
    for match in re.finditer(r"\b__shared__\b", code):
        line_start = code.rfind("\n", 0, match.start()) + 1
        if code[line_start:match.start()].lstrip().startswith("#"):
            continue  # a macro's definition
        where = f"line {line_of(text, match.start())}"
        statement_start = max(code.rfind(c, 0, match.start()) for c in ";{}") + 1
        if re.search(r"\bextern\b", code[statement_start:match.start()]):
            raise LaunchError(f"{where}: extern __shared__ (dynamic shared memory) is not "
                              "emulated")
        end = statement_end(code, match.end())
        if end < 0:
            raise LaunchError(f"{where}: no ; after __shared__")
        try:
            names = declared_names(code[match.end():end])
        except LaunchError as e:
            raise LaunchError(f"{where}: {e}")
        calls = "".join(f" ::sbpc_emu::sharedDeclared(&{n}, sizeof({n}));" for n in names)
        out.append(text[done:end + 1] + calls)
        done = end + 1
    out.append(text[done:])
    return "".join(out)


def rewrite(text):
    code = masked(text)
    out, done = [], 0
    while True:
        launch = code.find("<<<", done)
        if launch < 0:
            out.append(text[done:])
            return "".join(out)
        try:
            start = kernel_start(code, launch)
            config_end = code.find(">>>", launch)
            if config_end < 0:
                raise LaunchError("no >>> after <<<")
            args_start = config_end + 3
            while args_start < len(code) and code[args_start].isspace():
                args_start += 1
            if code[args_start:args_start + 1] != "(":
                raise LaunchError("no ( after >>>")
            args_end = matching_forwards(code, args_start, "(", ")")
        except LaunchError as e:
            raise LaunchError(f"line {line_of(text, launch)}: {e}")
        kernel = text[start:launch].rstrip()
        config = text[launch + 3:config_end]
        args = text[args_start + 1:args_end - 1]
        name = " ".join(kernel.split()).replace('"', '\\"')
        call = (f'::sbpc_emu::Launch("{name}", {config})('
                f'[](auto &...sbpcEmuArgs) {{ {kernel}(sbpcEmuArgs...); }}')
        call += (", " + args if args.strip() else "") + ")"
        # Keep every line where it was.
        lost = text.count("\n", start, args_end) - call.count("\n")
        out.append(text[done:start] + call + "\n" * lost)
        done = args_end


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    source, target = sys.argv[1], sys.argv[2]
    with open(source) as f:
        text = f.read()
    try:
        rewritten = rewrite(mark_shared(text))
    except LaunchError as e:
        sys.exit(f"{source}: {e}")
    path = os.path.abspath(source).replace("\\", "\\\\").replace('"', '\\"')
    with open(target, "w") as f:
        f.write(f'#line 1 "{path}"\n' + rewritten)


if __name__ == "__main__":
    main()
