"""How to rerun a failed test: the hypothesis example and its @reproduce_failure line, and
the pytest command with the options that selected it."""

from __future__ import annotations

import re
import shlex

_REPRODUCE = re.compile(r"^(?:E\s+)?.*(@reproduce_failure\(.*?\)|@seed\(\d+\)|"
                        r"--hypothesis-seed=\d+).*$", re.M)


def hypothesis_reproduction(text: str) -> str:
    """The falsifying example (up to its closing parenthesis) and the @reproduce_failure line
    from hypothesis's report."""
    lines = [re.sub(r"^E\s{1,3}", "", line) for line in text.splitlines()]
    parts: list[str] = []
    for k, line in enumerate(lines):
        if re.match(r"\s*(?:Falsifying (?:explicit )?example|Failing test case):", line):
            block, depth = [], 0
            for follow in lines[k:]:
                block.append(follow)
                depth += follow.count("(") - follow.count(")")
                if depth <= 0:
                    break
            parts.append("\n".join(block).strip())
    parts += [m.group(0).strip() for m in _REPRODUCE.finditer("\n".join(lines))]
    return "\n".join(dict.fromkeys(parts))


def reproduce_command(nodeid: str, rootpath, gemm=None) -> str:
    """The command that reruns test ``nodeid`` with the run's profile, backend and catalogs."""
    from gemmcheck.contract import catalog as builtin

    cmd = ["pytest", nodeid]
    if gemm:
        cmd += ["--gemm-profile", gemm.profile.name, "--gemm-backend", gemm.backend_name]
        for catalog in gemm.catalogs:
            cmd += ["--gemm-catalog", "builtin" if catalog == builtin.BUILTIN else str(catalog)]
    return f"# from the repository root ({rootpath})\n" + shlex.join(cmd) + "\n"
