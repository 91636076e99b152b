# SPDX-License-Identifier: MIT
"""Console transcripts quoted in the docs, shared by the tests that check them.

Fixture blocks (`<!-- fixture: NODE ... -->`, test_manifests.py) run on a generated node; real-kernel
blocks run inside the real-kernel stage's guest (tests/kernel/test_docs.py, `make check-kernel`):

    <!-- real-kernel -->                      or  <!-- real-kernel config.json=tests/kernel/configs/X.json -->
    ```console
    $ rdma link
    link rxe0/1 state ACTIVE physical_state LINK_UP netdev vethA
    $ rdma-dp discover
    ...
    ```

Each `$ ` line is a command (no shell: no pipes or redirections), the lines up to the next `$ `
line its expected output (stdout, then stderr). `F=SRC` copies SRC (relative to the repository)
to F in the directory the commands run in. A line `...` stands for any number of lines (an
excerpt). What differs from one boot to the next (veth MAC addresses and the GUIDs and link-local
GIDs the kernel derives from them) is normalised on both sides before comparing, and so are tabs
(expanded to 8 columns: rdma-core's tools indent with tabs, the docs with spaces) and trailing
blanks (`rdma link` ends its lines with one; the docs are trimmed), see `normalise`.
"""
import re

REAL_KERNEL_BLOCK = re.compile(
    r"<!-- real-kernel((?: [\w.-]+=[\w./-]+)*) -->\s*\n```[a-z]*\n(.*?)```", re.S)


def excerpt_matches(got, expected):
    """got's lines equal expected's, a line "..." in expected matching any run of lines."""
    got, exp = got.split("\n"), expected.split("\n")

    def m(i, j):
        if j == len(exp):
            return i == len(got)
        if exp[j] == "...":
            return any(m(k, j + 1) for k in range(i, len(got) + 1))
        return i < len(got) and got[i] == exp[j] and m(i + 1, j + 1)
    return m(0, 0)


MAC = re.compile(r"\b[0-9a-f]{2}(?::[0-9a-f]{2}){5}\b")
# a node/port GUID as rdma-core and rdma-dp print it (68f6:58ff:febd:2506), also as the interface
# ID of a link-local GID (fe80::68f6:58ff:febd:2506, fe80:0000:0000:0000:68f6:58ff:febd:2506)
GUID = re.compile(r"\b[0-9a-f]{1,4}(?::[0-9a-f]{1,4}){3}\b")
# the same as one number (ibv_devices: 5446ebfffeedb254, ibstat: 0x5446ebfffeedb254)
GUID_HEX = re.compile(r"\b(?:0x)?[0-9a-f]{16}\b")


def normalise(text):
    """text with what differs between boots of the same guest replaced by fixed tokens: MAC
    addresses (veth pairs get random ones) and the GUIDs derived from them; tabs expanded and
    trailing blanks dropped."""
    text = "\n".join(line.expandtabs(8).rstrip() for line in text.split("\n"))
    text = MAC.sub("<mac>", text)
    text = GUID_HEX.sub("<guid>", text)
    return GUID.sub("<guid>", text)


def real_kernel_blocks(repo):
    """[(where, files, [(command, expected output)])] for every real-kernel block in README.md
    and docs/*.md; where is "docs/X.md:LINE" (the marker's line)."""
    out = []
    for f in [repo / "README.md"] + sorted((repo / "docs").glob("*.md")):
        text = f.read_text()
        for m in REAL_KERNEL_BLOCK.finditer(text):
            where = "%s:%d" % (f.relative_to(repo), text[:m.start()].count("\n") + 1)
            files = dict(kv.split("=", 1) for kv in m.group(1).split())
            cmds = []
            for line in m.group(2).rstrip("\n").split("\n"):
                if line.startswith("$ "):
                    cmds.append([line[2:], []])
                elif cmds:
                    cmds[-1][1].append(line)
                else:
                    raise ValueError("%s: a real-kernel block starts with `$ <command>`, not %r"
                                     % (where, line))
            out.append((where, files, [(c, "\n".join(o)) for c, o in cmds]))
    return out
