"""What ran the suite (environment.properties) and in which CI (executor.json)."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path

from gemmcheck.report.categories import categories_json

# What a reviewer asks first comes first: the report shows the first eight entries.
FIRST_KEYS = ("runs_on", "gpu", "driver", "cuda_driver", "cuda_runtime", "cupy", "nvrtc", "nvcc", "g++",
              "profile", "catalog")


def environment(gemm=None) -> dict[str, str]:
    """What ran the suite, for environment.properties (one line each). Keys are short: the
    report shows about twelve characters of a key."""
    from gemmcheck.backends import device

    env: dict[str, str] = {}
    ok, why = device.cuda_device()
    if ok:
        try:
            import cupy

            props = device.properties(0)
            env["gpu"] = props.name
            env["capability"] = f"{props.capability[0]}.{props.capability[1]}"
            env["sm_count"] = str(props.sm_count)
            env["gpu_memory"] = f"{props.memory_bytes / 2**30:.1f} GiB"
            env["cuda_driver"] = _cuda_version(cupy.cuda.runtime.driverGetVersion())
            env["cuda_runtime"] = _cuda_version(cupy.cuda.runtime.runtimeGetVersion())
        except Exception as exc:
            env["gpu"] = f"unknown ({type(exc).__name__}: {exc})"
        smi = _nvidia_smi_driver()
        if smi:
            env["driver"] = smi
    else:
        env["gpu"] = f"none ({why})"
    for module in ("cupy", "numpy", "hypothesis", "pytest", "matplotlib"):
        env[module] = _version(module)
    env["nvrtc"] = _nvrtc_version()
    env["nvcc"] = _nvcc_version()
    env["python"] = platform.python_version()
    env["platform"] = platform.platform()
    sanitizer = shutil.which("compute-sanitizer")
    env["sanitizer"] = sanitizer or "not found on PATH"
    try:
        from hypothesis import settings

        env["hyp_profile"] = settings._current_profile or "default"
    except Exception:
        pass
    if gemm is not None:
        env["profile"] = gemm.profile.name
        env["backend"] = (gemm.backend.describe() if gemm.backend is not None
                                    else f"{gemm.backend_name}" + (f" ({gemm.backend_error})"
                                                                   if gemm.backend_error else ""))
        env["catalog"] = ", ".join(str(c) for c in gemm.catalogs)
        simulated = bool(getattr(gemm.backend, "simulated", False))
        if simulated:
            env["g++"] = _gxx_version()
        env["runs_on"] = (f"CPU simulator (g++ {env['g++']})" if simulated
                          else f"GPU: {env['gpu']}" if ok else env["backend"])
    return {**{k: env[k] for k in FIRST_KEYS if k in env}, **env}


def _nvrtc_version() -> str:
    try:
        from gemmcheck.compile.compiler import nvrtc_version

        return nvrtc_version()
    except Exception as exc:   # no cuda-bindings, or no NVRTC library: the report says which
        return f"unavailable ({type(exc).__name__})"


def _nvcc_version() -> str:
    """nvcc's release and build (``V13.0.88``), or why there is none."""
    nvcc = shutil.which("nvcc")
    if not nvcc:
        return "not found on PATH"
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"unknown ({type(exc).__name__})"
    found = re.search(r"\bV(\d+\.\d+\.\d+)", out)
    return found.group(1) if found else "unknown"


def _gxx_version() -> str:
    """The version of the g++ that builds the CPU simulator's kernels (``12.2.0``)."""
    try:
        from gemmcheck.backends.cpu_sim import build

        return build.compiler()[1].removeprefix("g++ ")
    except Exception as exc:
        return f"unknown ({type(exc).__name__})"


def _cuda_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


def _nvidia_smi_driver() -> str | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None


def _version(module: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    for dist in (module, f"{module}-cuda13x", f"{module}-cuda12x"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return "not installed"


def properties_text(values: dict[str, str]) -> str:
    """Java .properties: keys and values escaped so any text survives."""
    def esc(s: str, key: bool) -> str:
        s = s.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        s = s.replace("=", "\\=").replace(":", "\\:").replace("#", "\\#").replace("!", "\\!")
        return s.replace(" ", "\\ ") if key else s
    return "".join(f"{esc(k, True)}={esc(str(v), False)}\n" for k, v in values.items())


def read_properties(text: str) -> dict[str, str]:
    """The entries of an environment.properties file (properties_text's escapes undone), in order."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith(("#", "!")):
            continue
        key, value, escaped, split = [], [], False, False
        for ch in line:
            target = value if split else key
            if escaped:
                target.append({"n": "\n", "r": "\r"}.get(ch, ch))
                escaped = False
            elif ch == "\\":
                escaped = True
            elif not split and ch in "=:":
                split = True
            else:
                target.append(ch)
        out["".join(key).strip()] = "".join(value).strip()
    return out


def executor(environ=os.environ) -> dict | None:
    """executor.json for the CI we run under (GitHub Actions, GitLab CI, Jenkins, generic CI)."""
    if environ.get("GITHUB_ACTIONS") == "true":
        server, repo, run = (environ.get("GITHUB_SERVER_URL", "https://github.com"),
                             environ.get("GITHUB_REPOSITORY", ""), environ.get("GITHUB_RUN_ID", ""))
        url = f"{server}/{repo}/actions/runs/{run}" if repo and run else ""
        return _executor("GitHub Actions", "github", url, environ.get("GITHUB_RUN_NUMBER"),
                         f"{environ.get('GITHUB_WORKFLOW', '')} #{environ.get('GITHUB_RUN_NUMBER', '')}",
                         url)
    if environ.get("GITLAB_CI") == "true":
        return _executor("GitLab CI", "gitlab", environ.get("CI_PROJECT_URL", ""),
                         environ.get("CI_PIPELINE_IID"), f"{environ.get('CI_JOB_NAME', '')} "
                         f"#{environ.get('CI_PIPELINE_IID', '')}", environ.get("CI_JOB_URL", ""))
    if environ.get("JENKINS_URL") or environ.get("BUILD_URL"):
        return _executor("Jenkins", "jenkins", environ.get("JENKINS_URL", ""),
                         environ.get("BUILD_NUMBER"), environ.get("BUILD_TAG", environ.get("JOB_NAME", "")),
                         environ.get("BUILD_URL", ""))
    if environ.get("CI", "").lower() in ("true", "1", "yes"):
        return _executor("CI", "ci", "", None, environ.get("CI_BUILD_NAME", ".ci/run"), "")
    return None


def _executor(name, kind, url, order, build_name, build_url) -> dict:
    data = {"name": name, "type": kind, "url": url, "buildName": build_name.strip(),
            "buildUrl": build_url, "reportName": "gemmcheck"}
    if order and str(order).isdigit():
        data["buildOrder"] = int(order)
    return {k: v for k, v in data.items() if v not in ("", None)}


def write_result_metadata(results_dir: Path, gemm=None, environ=os.environ) -> None:
    """environment.properties, categories.json and (in CI) executor.json into ``results_dir``."""
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "environment.properties").write_text(properties_text(environment(gemm)))
    (results_dir / "categories.json").write_text(json.dumps(categories_json(), indent=2))
    info = executor(environ)
    if info:
        (results_dir / "executor.json").write_text(json.dumps(info, indent=2))


