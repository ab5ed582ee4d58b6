"""compute-sanitizer (racecheck, synccheck, memcheck, initcheck) in a child, parsed into Findings.

Every run goes through gemmcheck.judge.isolation: a child with CuPy's memory pool
off and exact-size allocations (no guard bands: an access outside an
operand must land outside every allocation for memcheck to see it; memcheck's
`--padding` keeps neighbouring allocations apart), `--error-exitcode` (the
tools exit 0 even when they report), device backtraces only, and timeouts (a
kernel that faults under a tool is a crash, one that stalls is a hang).

What each report establishes, and no more:
- racecheck "Race reported between Write access at ... and Read access at ...":
  SHARED_MEMORY_RACE. Its analysis report does not say which access came
  first, so no RAW / WAR direction is claimed.
- synccheck "Barrier error detected. Divergent thread(s) in block/warp": DIVERGENT_BARRIER.
- synccheck "Barrier error detected. Invalid arguments": INVALID_WARP_MASK. NVIDIA's
  documentation (Understanding Synccheck Reports) gives it for a barrier primitive called
  with invalid arguments, "for example if not all threads reaching a __syncwarp() declare
  themselves in the mask parameter"; it does not see lanes a mask names that never arrive.
  A shuffle's constant mask is dropped by the compiler (sm_90: SHFL.IDX carries none), so
  there it may say nothing: the CPU simulator's warp tracking sees those.
- memcheck "Invalid __global__/__shared__/__local__ read|write": OUT_OF_BOUNDS_READ / _WRITE.
- initcheck "Uninitialized __global__ memory read": OUT_OF_BOUNDS_READ (every
  operand and C is initialized before the launch, so it read outside them).
Anything else the tool reports is kept verbatim as `unrecognized`, never dropped.

A launch that failed under a tool (a fault: "unspecified launch failure", an illegal address)
is a CRASH only where no tool reported an access of the kernel's outside memory: memcheck ends
a kernel at the invalid access it reports (it destroys the context on it), and the same access
faults under the other tools, which have no guard bands to catch it. A reported access is the
root cause, and such a failure is what it explains, said in its finding (`judged`). A launch
that failed without a tool (the plain detectors' run, guard bands around every operand) is
the kernel's crash in its own right: broken_faults stores where no allocation is.
"""

from __future__ import annotations

import functools
import re
import subprocess
from dataclasses import dataclass, field, replace

from gemmcheck.backends import DEFAULT_HANG_TIMEOUT_S, device
from gemmcheck.verdict.detectors import SANITIZER_TOOLS, Detector
from gemmcheck.phases import timed
from gemmcheck.verdict import Defect, Finding

TOOLS = tuple(t.value for t in SANITIZER_TOOLS)
ERROR_EXITCODE = 99
PRINT_LIMIT = 100   # reports a child prints, all its launches together (--print-limit)
# The defects whose reports come by the hundred or thousand (one per thread and access) under a
# tool: a kernel with one fills a child's PRINT_LIMIT, and a neighbour's reports in that child
# would go unprinted (on an H200, in a child kept going after the first one's error, synccheck
# printed nothing of a second divergent barrier; memcheck nothing of a second read out of bounds).
FLOODS = {"memcheck": frozenset({Defect.OUT_OF_BOUNDS_READ.value, Defect.OUT_OF_BOUNDS_WRITE.value}),
          "synccheck": frozenset({Defect.DIVERGENT_BARRIER.value, Defect.INVALID_WARP_MASK.value})}
_UNPRINTED = re.compile(r"ERROR SUMMARY: (\d+) errors? were not printed")
MISSING = "needs compute-sanitizer on PATH; not found"
STEP_TIMEOUT_S = 120.0
# A tool slows a kernel by one to two orders of magnitude, more when it records an error per
# thread and access: a launch is the kernel's hang under a tool only after this many times the
# plain hang timeout (--gemm-hang-timeout). On an H200, in a nightly run with 8 workers sharing
# the GPU, memcheck over broken_unguarded_loads-float32-TILE32 (1024 threads reading out of
# bounds) and racecheck over broken_no_sync_after_load-bfloat16-TILE32 outlived 10 s on
# M65 N33 K129, launches the plain run finishes in milliseconds.
TOOL_SLOWDOWN = 6.0


def hang_timeout_under_tool(hang_timeout_s: float) -> float:
    """How long a launch may take under a tool before it is the kernel's hang."""
    return hang_timeout_s * TOOL_SLOWDOWN
MIN_PADDING = 64 * 1024

_PREFIX = re.compile(r"^=+ ?")


def executable() -> str | None:
    return device.tool("compute-sanitizer")


@functools.lru_cache(maxsize=None)
def takes_option(exe: str, option: str) -> bool:
    """Whether this compute-sanitizer lists `option` in its --help (False where it does not run)."""
    try:
        out = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return re.search(rf"(^|\s){re.escape(option)}\b", out.stdout + out.stderr, re.M) is not None


def command(tool: str, *, exe: str = "compute-sanitizer", padding: int = MIN_PADDING) -> list[str]:
    if tool not in TOOLS:
        raise ValueError(f"unknown compute-sanitizer tool {tool!r}; use one of {', '.join(TOOLS)}")
    argv = [exe, "--tool", tool, "--error-exitcode", str(ERROR_EXITCODE), "--print-limit", str(PRINT_LIMIT),
            # (Not --destroy-on-device-error kernel, which would keep a child going after a
            # precise error: on an H200 it made broken_divergent_barrier hang under synccheck
            # and kill racecheck's child.)
            # No host backtraces: they show gemmcheck's launch, never the kernel, and cost the
            # tool (memcheck over broken_unguarded_loads-float64-TILE32 on an H200: 4.2 s and
            # 259 kB of log with them, 2.3 s and 39 kB without).
            "--show-backtrace", "device"]
    if takes_option(exe, "--target-processes"):
        # Only the child itself, which launches every kernel: the tool follows all the
        # processes a child starts by default, and a compiler a child runs (nvcc on a build
        # the cache has not) would run instrumented, each of its own processes too.
        argv += ["--target-processes", "application-only"]
    if tool == "memcheck":
        argv += ["--padding", str(padding)]
    return argv


# -- parsing ----------------------------------------------------------------------------------

@dataclass
class Block:
    """One report: its first line and the indented lines under it (prefix stripped)."""

    head: str
    body: list[str] = field(default_factory=list)

    def function(self) -> str | None:
        """The kernel the report is about, normalized (`broken_x<float,16>`), if it names one."""
        for line in [self.head, *self.body]:
            name = kernel_in(line)
            if name:
                return name
        return None


def kernel_in(line: str) -> str | None:
    """The normalized kernel name in "... at void name<float, (int)16>(const T1 *, ...)+0x3b0"."""
    m = re.search(r"\bat (?:void )?([A-Za-z_][\w:]*)(<)?", line)
    if not m:
        return None
    name, i = m.group(1), m.end(1)
    if m.group(2):
        depth = 0
        for j in range(i, len(line)):
            depth += {"<": 1, ">": -1}.get(line[j], 0)
            if depth == 0:
                name += line[i:j + 1]
                break
        else:
            return None
    elif not line[i:i + 1] == "(":
        return None
    return normalize(name)


def normalize(name_expression: str) -> str:
    """Compare kernel names as the catalog and the tool write them: no casts, no spaces."""
    return re.sub(r"\((?:unsigned |signed |long |short )*\w+\)", "", name_expression).replace(" ", "")


def blocks(text: str) -> list[Block]:
    """Split a compute-sanitizer log into report blocks; other lines are ignored."""
    out: list[Block] = []
    current: Block | None = None
    for raw in text.splitlines():
        if not raw.startswith("="):
            current = None  # program output between reports
            continue
        line = _PREFIX.sub("", raw)
        if not line.strip():
            current = None
            continue
        if raw.startswith("========= ") and not raw.startswith("=========  "):
            current = Block(line.strip())
            out.append(current)
        elif current is not None:
            current.body.append(line.strip())
    return out


_SKIP = re.compile(r"^(COMPUTE-SANITIZER|ERROR SUMMARY|RACECHECK SUMMARY|Program hit |"
                   r"Target application returned an error|LEAK SUMMARY)")
_RACE = re.compile(r"^(Error|Warning): Race reported between (\w+) access at (.+)$")
_RACE_OTHER = re.compile(r"^and (\w+) access at (.+?)(?: \[(\d+) hazards?\])?$")
_BARRIER = re.compile(r"^Barrier error detected\. (.+)$")
_INVALID = re.compile(r"^Invalid (__\w+__) (read|write) of size (\d+) bytes?$")
_UNINIT = re.compile(r"^Uninitialized (__\w+__) memory read of size (\d+) bytes?$")
_THREAD = re.compile(r"by thread \((\d+),(\d+),(\d+)\) in block \((\d+),(\d+),(\d+)\)")


@dataclass
class Report:
    """One tool's parsed output for one kernel."""

    tool: str
    findings: list[Finding] = field(default_factory=list)
    unrecognized: list[str] = field(default_factory=list)  # reports no rule here understands
    api_errors: list[str] = field(default_factory=list)    # "Program hit ..." lines: consequences


def parse(tool: str, report_blocks) -> Report:
    """Findings from one tool's report blocks (all about one kernel)."""
    report = Report(tool)
    races, barriers, bad_arguments, invalid, uninit = [], [], [], {}, []
    for b in report_blocks:
        if b.head.startswith("Program hit "):
            report.api_errors.append(b.head)
            continue
        if _SKIP.match(b.head) or b.head.startswith("Host Frame") or b.head.startswith("Saved host"):
            continue
        if m := _RACE.match(b.head):
            others = [_RACE_OTHER.match(x) for x in b.body]
            pairs = [{"access": o.group(1), "at": o.group(2), "hazards": int(o.group(3) or 0)}
                     for o in others if o]
            races.append({"severity": m.group(1).lower(), "access": m.group(2), "at": m.group(3),
                          "with": pairs, "hazards": sum(p["hazards"] for p in pairs)})
        elif (m := _BARRIER.match(b.head)) and (m.group(1).startswith("Divergent thread")
                                                or m.group(1).rstrip(".") == "Invalid arguments"):
            t = next((_THREAD.search(x) for x in b.body if _THREAD.search(x)), None)
            (barriers if m.group(1).startswith("Divergent thread") else bad_arguments).append(
                {"what": m.group(1), "thread": t.group(0) if t else None,
                 "at": next((x[3:] for x in b.body if x.startswith("at ")), None)})
        elif m := _INVALID.match(b.head):
            key = (m.group(1), m.group(2))
            invalid.setdefault(key, []).append({"size": int(m.group(3)), "details": b.body[:5]})
        elif m := _UNINIT.match(b.head):
            uninit.append({"space": m.group(1), "size": int(m.group(2)), "details": b.body[:3]})
        else:
            report.unrecognized.append("\n".join([b.head, *b.body[:3]]))
    if races:
        n_err = sum(r["severity"] == "error" for r in races)
        hazards = sum(r["hazards"] for r in races)
        accesses = sorted({p["access"].lower() for r in races for p in r["with"]} | {r["access"].lower() for r in races})
        report.findings.append(Finding(
            Defect.SHARED_MEMORY_RACE, Detector.RACECHECK,
            f"racecheck reports {len(races)} shared-memory race(s) ({n_err} error(s), "
            f"{len(races) - n_err} warning(s); {hazards} hazards) between {' and '.join(accesses)} "
            f"accesses with no barrier between them; it does not say which came first (RAW vs WAR "
            f"not established)", hazards, None, {"races": races[:8]}))
    if barriers:
        first = barriers[0]
        report.findings.append(Finding(
            Defect.DIVERGENT_BARRIER, Detector.SYNCCHECK,
            f"synccheck: {first['what']} ({len(barriers)} report(s); first {first['thread']}): "
            f"a __syncthreads() is reached by only some threads of a block", len(barriers), None,
            {"reports": barriers[:8]}))
    if bad_arguments:
        first = bad_arguments[0]
        report.findings.append(Finding(
            Defect.INVALID_WARP_MASK, Detector.SYNCCHECK,
            f"synccheck: Barrier error detected. {first['what']} ({len(bad_arguments)} report(s); first "
            f"{first['thread']}{' at ' + first['at'] if first['at'] else ''}): a barrier or warp-synchronous "
            f"primitive called with invalid arguments, such as a __syncwarp() whose calling lane is not in "
            f"its mask", len(bad_arguments), None, {"reports": bad_arguments[:8]}))
    for (space, direction), items in sorted(invalid.items()):
        defect = Defect.OUT_OF_BOUNDS_WRITE if direction == "write" else Defect.OUT_OF_BOUNDS_READ
        where = " ".join(items[0]["details"][:4])
        report.findings.append(Finding(
            defect, Detector.MEMCHECK,
            f"memcheck: {len(items)} invalid {space} {direction}(s) of {items[0]['size']} bytes; "
            f"first: {where}", len(items), None, {"space": space, "reports": items[:8]}))
    if uninit:
        report.findings.append(Finding(
            Defect.OUT_OF_BOUNDS_READ, Detector.INITCHECK,
            f"initcheck: {len(uninit)} read(s) of uninitialized {uninit[0]['space']} memory; A, B "
            f"and C are all initialized before the launch, so the kernel read outside them",
            len(uninit), None, {"reports": uninit[:8]}))
    return report


# -- running ------------------------------------------------------------------------------------

@dataclass
class ToolRun:
    """One tool over a set of instantiations: a Report per instance id, plus the raw log."""

    tool: str
    reports: dict[str, Report]
    outcomes: dict                 # step id -> isolation.StepOutcome
    log: str
    unattributed: list[str] = field(default_factory=list)  # reports naming no kernel of the run
    unprinted: set = field(default_factory=set)  # instance ids whose child reached PRINT_LIMIT

    def findings(self, instance) -> list[Finding]:
        """The tool's findings for one instantiation; a launch that failed under the tool
        with no report from it is a CRASH (or HANG) in its own right, and one after it
        reported an access outside memory is what that access explains (judged)."""
        found = list(self.reports[instance.id].findings)
        failed = [replace(f, summary=f"under {self.tool}: {f.summary}", details={**f.details, "tool": self.tool})
                  for f in (o.finding for o in self.outcomes_of(instance).values()) if f is not None]
        if failed and not found:
            return failed[:1]
        return judged(found + failed[:1]) if any(map(_an_access, found)) else found

    def outcomes_of(self, instance) -> dict:
        """{step id: StepOutcome} of one instantiation's steps, in step order."""
        from gemmcheck.judge import isolation

        key = isolation.instance_key(instance)
        return {i: o for i, o in sorted(self.outcomes.items()) if o.step.instance_key == key}

    def of(self, instance) -> "ToolRun":
        """The run as one of its rows sees it: that row's report and steps, and its steps'
        output (the whole log when the run was of this row alone). Reports no step or kernel
        can be tied to stay in `unattributed`, shown to every row of the run."""
        if set(self.reports) == {instance.id}:
            return self
        mine = self.outcomes_of(instance)
        others = sorted(set(self.reports) - {instance.id})
        lines = [f"(one {self.tool} child ran this row with {', '.join(others)}: "
                 f"below, its output during this row's launches)"]
        for o in mine.values():
            s = o.step
            lines += [f"--- {s.purpose} M{s.M} N{s.N} K{s.K}: {o.status}"
                      + (f" ({o.message})" if o.message else ""), *o.output]
        return ToolRun(self.tool, {instance.id: self.reports[instance.id]}, mine, "\n".join(lines),
                       list(self.unattributed), self.unprinted & {instance.id})


def judged(findings: list[Finding]) -> list[Finding]:
    """`findings` of one instantiation (every tool's, and the plain detectors'), a launch that
    failed under a tool judged by what the tools reported: where memcheck reported an access
    outside memory, that access is the root cause and each CRASH under a tool (memcheck ends a
    kernel at the access it reports; the same access faults under the other tools) is what it
    explains, said in the access's finding instead of standing as a crash of its own. Without
    such a report, and for a crash without a tool (the plain run's), as they are."""
    accesses = [f for f in findings if _an_access(f)]
    failures = [f for f in findings if f.defect == Defect.CRASH and f.details.get("tool")]
    if not (accesses and failures):
        return list(findings)
    root = accesses[0]
    explained = replace(root, summary=f"{root.summary}; it explains the launch failure"
                                      f"{'s' if len(failures) > 1 else ''}: {'; '.join(f.summary for f in failures)}",
                        details={**root.details, "explains": [f.summary for f in failures]})
    return [explained if f is root else f for f in findings if f not in failures]


def _an_access(finding: Finding) -> bool:
    """Whether `finding` is an access outside memory that memcheck reported (it stops the kernel there)."""
    return finding.detector == Detector.MEMCHECK and finding.defect in (Defect.OUT_OF_BOUNDS_WRITE,
                                                                          Defect.OUT_OF_BOUNDS_READ)


def _groups(steps, instances):
    """Batches of steps in which no two instantiations share a kernel name (so the tool's
    reports can be told apart by the name they carry)."""
    groups: list[list] = []
    names: list[set] = []
    for step in steps:
        name = normalize(instances[step.id].name_expression)
        key = step.instance_key
        for g, n in zip(groups, names):
            if name not in n or any(s.instance_key == key for s in g):
                g.append(step)
                n.add(name)
                break
        else:
            groups.append([step])
            names.append({name})
    return groups


def _counted(block: Block) -> bool:
    """Whether a report is one the tool counts against --print-limit for sure (an error; not a
    racecheck warning, nor an API error, which it might print past the limit)."""
    m = _RACE.match(block.head)
    return (m.group(1) == "Error") if m else any(p.match(block.head) for p in (_BARRIER, _INVALID, _UNINIT))


def _maybe_unprinted(child, instances) -> set[str]:
    """The rows of a child that reached PRINT_LIMIT whose reports may be among those unprinted:
    each with a step at or after the last step that printed one (the tool printed until then,
    so every step before it printed all its reports); every row when no step printed one. (A
    kernel that floods the tool ends its batch: the rows before it keep their verdicts.)"""
    ran = [i for i, o in child.outcomes.items() if o.status != "not_run"]
    printing = [i for i in ran if any(_counted(b) for b in blocks("\n".join(child.outcomes[i].output)))]
    last = max(printing, default=min(ran, default=0))
    return {instances[i].id for i in ran if i >= last}


@timed("sanitizer")
def run(tool: str, plan, *, exe: str | None = None, backend: str = "cupy",
        hang_timeout_s: float = DEFAULT_HANG_TIMEOUT_S) -> ToolRun:
    """Run `tool` over `plan` ([(instance, [(purpose, problem)])]) in as few children as it
    allows; a launch is a hang after hang_timeout_under_tool(hang_timeout_s)."""
    from gemmcheck.problems import harness
    from gemmcheck.judge import isolation

    exe = exe or executable()
    if exe is None:
        raise RuntimeError(MISSING)
    steps, instances = [], {}
    for instance, problems in plan:
        for purpose, p in problems:
            step = isolation.Step.of(len(steps), instance, p, purpose=purpose, repeats=1, control=False)
            steps.append(step)
            instances[step.id] = instance
    padding = max([MIN_PADDING] + [harness.guard_elements(s.M, s.N, s.K, s.tile) * 8 for s in steps])
    padding = -(-padding // 4096) * 4096
    under_tool = hang_timeout_under_tool(hang_timeout_s)
    reports = {i.id: Report(tool) for i in instances.values()}
    outcomes, logs, unattributed, unprinted = {}, [], [], set()
    for group in _groups(steps, instances):
        got, children = isolation.run_steps(group, backend=backend, exact_allocations=True,
                                            prefix=command(tool, exe=exe, padding=padding),
                                            hang_timeout_s=under_tool,
                                            step_timeout=max(STEP_TIMEOUT_S, under_tool + 30))
        outcomes.update(got)
        by_name = {}
        for s in group:
            by_name.setdefault(normalize(instances[s.id].name_expression), instances[s.id])
        for child in children:
            logs.append("\n".join(child.lines))
            if any(_UNPRINTED.search(line) for line in child.lines):
                unprinted |= _maybe_unprinted(child, instances)
            # What the tool says of a child that died ("process didn't terminate successfully")
            # names no kernel: it is the row's whose launch died there, when one did.
            died = {instances[i].id for i, o in child.outcomes.items() if o.status in ("crash", "failed", "hang")}
            assigned: dict[str, list[Block]] = {}
            in_steps = set()
            # A report inside a step's window belongs to that step's kernel unless it names another.
            for step_id, out in child.outcomes.items():
                for b in blocks("\n".join(out.output)):
                    fn = b.function()
                    inst = by_name.get(fn) or instances[step_id]
                    assigned.setdefault(inst.id, []).append(b)
                    in_steps.add((b.head, tuple(b.body)))
            for b in blocks("\n".join(child.lines)):
                if (b.head, tuple(b.body)) in in_steps:
                    continue
                inst = by_name.get(b.function())
                if inst is not None:
                    assigned.setdefault(inst.id, []).append(b)
                elif _SKIP.match(b.head):
                    continue
                elif len(died) == 1:
                    assigned.setdefault(next(iter(died)), []).append(b)
                else:
                    unattributed.append("\n".join([b.head, *b.body[:3]]))
            for inst_id, bl in assigned.items():
                parsed = parse(tool, bl)
                rep = reports[inst_id]
                rep.findings += parsed.findings
                rep.unrecognized += parsed.unrecognized
                rep.api_errors += parsed.api_errors
    for rep in reports.values():
        rep.findings = _merge(rep.findings)
    return ToolRun(tool, reports, outcomes, "\n".join(logs), unattributed, unprinted)


def _merge(findings: list[Finding]) -> list[Finding]:
    """One finding per (defect, detector): the one with the largest count."""
    best: dict = {}
    for f in findings:
        key = (f.defect, f.detector)
        if key not in best or f.count > best[key].count:
            best[key] = f
    return list(best.values())
