"""The chiplore command line, driven as a user would: click's runner and a real subprocess."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from chiplore.cli import main
from chiplore.kg.embedded_store import EmbeddedStore
from chiplore.kg.models import Activity, DesignNode, Kernel, KernelVersion
from chiplore.kg.processes import pid_alive
from chiplore.kg.repo.designs import add_design, register_kernel, set_best
from chiplore.kg.repo.knowledge import record_activity


@pytest.fixture(params=["embedded", "neo4j"])
def env(request: pytest.FixtureRequest) -> dict[str, str]:
    return request.getfixturevalue(f"{request.param}_env")


def run(env: dict[str, str], *args: str) -> Result:
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def assert_one_line_error(result: Result, needle: str) -> None:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error:") and needle in lines[0], lines[0]
    assert "Traceback" not in result.output


def test_init_registers_the_target_and_status_reports_it(env: dict[str, str]) -> None:
    first = run(env, "init", "--json")
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["active_toolchain"] == "0.6.0"
    again = json.loads(run(env, "init", "--json").stdout)
    assert again["migrations_applied"] == [], "init is idempotent"
    status = json.loads(run(env, "status", "--graph", "--json").stdout)
    assert status["registered"] is True
    assert status["counts"]["Target"] == 1 and status["counts"]["Toolchain"] == 3
    assert [t["version"] for t in status["toolchains"]] == ["0.5.0", "0.6.0", "0.7.0"]
    human = run(env, "status")
    assert "simrngd" in human.stdout and "(active: 0.6.0)" in human.stdout  # said in words: bold is lost in a pipe


def test_cypher_refuses_writes(env: dict[str, str]) -> None:
    run(env, "init")
    assert_one_line_error(run(env, "cypher", "CREATE (:Kernel {name: 'x'})"), "writes are refused")
    assert_one_line_error(run(env, "cypher", "MATCH (t:Target) DETACH DELETE t"), "writes are refused")
    count = run(env, "cypher", "MATCH (k:Kernel) RETURN count(k) AS n", "--json")
    assert json.loads(count.stdout) == [{"n": 0}]
    assert json.loads(run(env, "status", "--graph", "--json").stdout)["counts"]["Target"] == 1


def test_cypher_reads_with_parameters(env: dict[str, str]) -> None:
    run(env, "init")
    result = run(env, "cypher", "MATCH (t:Toolchain {version: $v}) RETURN t.status AS s", "-p", "v=0.6.0", "--json")
    assert json.loads(result.stdout) == [{"s": "active"}]
    # Cypher's own list and map literals are lists and maps (`['a', 'b']` became the text "['a', 'b']",
    # and `WHERE x IN $s` then failed on a string)
    listed = run(env, "cypher", "MATCH (t:Toolchain) WHERE t.version IN $s RETURN t.version AS v ORDER BY v",
                 "-p", "s=['0.5.0', '0.7.0']", "--json")  # fmt: skip
    assert json.loads(listed.stdout) == [{"v": "0.5.0"}, {"v": "0.7.0"}]
    mapped = run(env, "cypher", "RETURN $m.k AS k, $m.on AS on", "-p", "m={k: 'x', on: true}", "--json")
    assert json.loads(mapped.stdout) == [{"k": "x", "on": True}]
    for given, said in (("s=[1, 2", "opens a list or a map but is not one"), ("s={1, 2}", "is not one"),
                        ("s=[os]", "is not one")):  # fmt: skip
        refused = run(env, "cypher", "RETURN $s AS s", "-p", given)
        assert refused.exit_code == 2 and said in refused.stderr, refused.stderr
    twice = run(env, "cypher", "RETURN $s AS s", "-p", "s=1", "-p", "s=2")  # the last one silently won
    assert twice.exit_code == 2 and "s is given twice" in twice.stderr
    unused = run(env, "cypher", "RETURN '$s' AS s // $s", "-p", "s=1")  # as `query` refuses a misspelt one
    assert unused.exit_code == 2 and "the query reads no $s" in unused.stderr
    # a misspelt label or type read as an empty answer, with nothing said (Neo4j's own client warns)
    misspelt = run(env, "cypher", "MATCH (t:Toolchains)<-[:HAS_TOOLCHAINS|HAS_TOOLCHAIN]-(x:Target) RETURN t")
    assert misspelt.exit_code == 0 and "the graph has no label Toolchains; no relationship type HAS_TOOLCHAINS" in (
        misspelt.stderr
    )
    known = run(env, "cypher", "MATCH (t:Toolchain {version: 'none'})<-[:HAS_TOOLCHAIN]-(:Target) RETURN t")
    assert known.exit_code == 0 and "the graph has no" not in known.stderr


def test_cypher_syntax_error_is_one_line(env: dict[str, str]) -> None:
    run(env, "init")
    assert_one_line_error(run(env, "cypher", "MATCH (n RETURN n"), "Cypher error")
    said = run(env, "cypher", "MATCH (k:Kernel RETURN k").stderr
    assert "EXPLAIN" not in said, said  # the user's query as they wrote it, positions into it (Neo4j's quote)
    if env["CHIPLORE_STORE"] == "neo4j":
        assert "(line 1, column 17 (offset: 16))" in said and '"MATCH (k:Kernel RETURN k"' in said, said


def test_json_output_is_strict_json(env: dict[str, str]) -> None:
    """A user's `RETURN 1.0/0.0` printed a bare Infinity, which strict JSON parsers refuse."""
    run(env, "init")
    out = run(env, "cypher", "RETURN 1.0/0.0 AS inf, 0.0/0.0 AS nan, [1.5, 1.0/0.0] AS xs", "--json").stdout

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in --json output")

    assert json.loads(out, parse_constant=refuse) == [{"inf": None, "nan": None, "xs": [1.5, None]}]
    assert_one_line_error(run(env, "cypher", "// what runs?"), "the query is only comments")


def test_cypher_reads_its_query_from_stdin(env: dict[str, str]) -> None:
    """`-` takes the query from stdin: one kept in a file, or longer than a shell argument may be."""
    run(env, "init")
    query = "// the versions, oldest first\nMATCH (t:Toolchain) RETURN t.version AS v ORDER BY v\n"
    result = CliRunner().invoke(main, ["cypher", "-", "--json"], env=env, input=query, catch_exceptions=False)
    assert json.loads(result.stdout) == [{"v": "0.5.0"}, {"v": "0.6.0"}, {"v": "0.7.0"}]


def test_a_bad_setting_names_its_variable(embedded_env: dict[str, str]) -> None:
    assert_one_line_error(run({**embedded_env, "CHIPLORE_SEED": "abc"}, "status"), "CHIPLORE_SEED='abc': ")
    assert_one_line_error(run({**embedded_env, "CHIPLORE_STORE": "xyz"}, "status"), "CHIPLORE_STORE='xyz': ")
    # a user's: inf overflowed a deadline in every command; an empty data dir meant the working folder
    assert_one_line_error(run({**embedded_env, "CHIPLORE_QUERY_TIMEOUT_S": "inf"}, "status"), "less than or equal")
    assert_one_line_error(run({**embedded_env, "CHIPLORE_DATA_DIR": ""}, "status"), "CHIPLORE_DATA_DIR='': empty")
    past = run(embedded_env, "cypher", "RETURN $x AS x", "-p", f"x={10**26}")  # a usage error: exit 2
    assert past.exit_code == 2 and "holds an integer past 64 bits" in past.stderr
    for spec in ("os:path", "os:getcwd", "json:loads"):  # importable and callable or not, but no target factory
        assert_one_line_error(run({**embedded_env, "CHIPLORE_TARGET": spec}, "status"), "is not a target factory")


def test_a_report_to_a_path_that_cannot_be_written_is_one_line(embedded_env: dict[str, str]) -> None:
    run(embedded_env, "init")
    assert_one_line_error(run(embedded_env, "report", "--out", "/proc/nope/r.html"), "/proc/nope/r.html")
    assert_one_line_error(run(embedded_env, "report", "--out", "/dev/null/r.html"), "/dev/null/r.html")


def test_named_query_errors_are_one_line(embedded_env: dict[str, str]) -> None:
    assert_one_line_error(run(embedded_env, "query", "no-such-query"), "no named query 'no-such-query'")
    assert_one_line_error(run(embedded_env, "query", "MATCH (k:Kernel) RETURN k"),
                          "run Cypher text with `chiplore cypher")  # fmt: skip
    assert_one_line_error(run(embedded_env, "query", "measurements-of"),
                          "needs parameter 'param' (str); pass -p param=...")  # fmt: skip
    assert_one_line_error(run(embedded_env, "query", "stale-facts", "-p", "limit=lots"), "must be int")
    assert_one_line_error(run(embedded_env, "query", "stale-facts", "-p", "limit=-5"), "counts rows: 0 or more, got -5")
    bad_pair = run(embedded_env, "query", "stale-facts", "-p", "limit")
    assert bad_pair.exit_code == 2 and "NAME=VALUE" in bad_pair.stderr
    run(embedded_env, "init")
    empty = run(embedded_env, "query", "dsl-summary", "-p", "toolchain=0.6.0", "-p", "construct=nosuch")
    assert empty.exit_code == 0 and "no rows for toolchain='0.6.0', construct='nosuch'" in empty.stderr  # both named
    # a version the graph lists but learnt nothing under: a diff from it read as every fact 'new'
    unlearnt = run(embedded_env, "query", "toolchain-diff", "-p", "from=0.5.0", "-p", "to=0.6.0")
    assert unlearnt.exit_code == 0 and "the graph knows toolchain 0.5.0 but learnt nothing under it" in unlearnt.stderr


def test_named_query_runs_and_lists(embedded_env: dict[str, str]) -> None:
    run(embedded_env, "init")
    listing = run(embedded_env, "query", "--json")
    assert "toolchain-diff" in {q["name"] for q in json.loads(listing.stdout)}
    empty = run(embedded_env, "query", "rules-in-force", "-p", "toolchain=0.6.0", "--json")
    assert empty.exit_code == 0 and json.loads(empty.stdout) == []


def test_wrong_password_is_one_line_and_never_echoed(neo4j_env: dict[str, str]) -> None:
    env = {**neo4j_env, "CHIPLORE_NEO4J_PASSWORD": "not-the-password-xyz"}
    result = run(env, "db", "check")
    assert_one_line_error(result, "refused the credentials")
    assert "not-the-password-xyz" not in result.output


def test_unreachable_database_is_one_line(neo4j_env: dict[str, str]) -> None:
    env = {**neo4j_env, "CHIPLORE_NEO4J_URI": "bolt://127.0.0.1:9"}
    assert_one_line_error(run(env, "status"), "unreachable")


def test_db_check_reports_server_and_hides_the_password(env: dict[str, str]) -> None:
    run(env, "init")
    result = run(env, "db", "check", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["schema_current"] is True and report["unique_constraints"] >= 20
    password = env.get("CHIPLORE_NEO4J_PASSWORD")
    if password:
        assert password not in result.output
        assert report["settings"]["neo4j_password"] == "set"


def test_data_dir_option_overrides_the_environment(tmp_path: Path, embedded_env: dict[str, str]) -> None:
    other = tmp_path / "elsewhere"
    assert run(embedded_env, "init", "--data-dir", str(other)).exit_code == 0
    assert (other / "falkordb").is_dir()
    assert json.loads(run(embedded_env, "status", "--graph", "--json", "--data-dir", str(other)).stdout)["registered"]
    assert_one_line_error(run(embedded_env, "status"), "no chiplore graph")  # the environment's dir has none


@pytest.mark.slow
def test_real_subprocess_runs_the_readme_main_job(embedded_env: dict[str, str]) -> None:
    executable = shutil.which("chiplore", path=str(Path(sys.executable).parent)) or "chiplore"
    env = {**os.environ, **embedded_env}
    init = subprocess.run([executable, "init"], env=env, capture_output=True, text=True, timeout=120)
    assert init.returncode == 0, init.stderr
    assert "ready" in init.stdout
    status = subprocess.run(
        [executable, "status", "--graph", "--json"], env=env, capture_output=True, text=True, timeout=120
    )
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["active_toolchain"] == "0.6.0"
    failing = subprocess.run([executable, "query", "nope"], env=env, capture_output=True, text=True, timeout=120)
    assert failing.returncode == 1 and failing.stderr.count("\n") == 1 and "Traceback" not in failing.stderr


def test_terminated_command_closes_the_store_and_stops_its_server(embedded_env: dict[str, str]) -> None:
    executable = shutil.which("chiplore", path=str(Path(sys.executable).parent)) or "chiplore"
    env = {**os.environ, **embedded_env}
    assert run(embedded_env, "init").exit_code == 0
    slow = "UNWIND range(1, 100000) AS a UNWIND range(1, 100000) AS b RETURN count(*) AS n"
    process = subprocess.Popen([executable, "cypher", slow], env=env, stderr=subprocess.PIPE, text=True)
    pid_file = Path(embedded_env["CHIPLORE_DATA_DIR"]) / "falkordb" / "redis.pid"
    deadline = time.monotonic() + 30
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    server_pid = int(pid_file.read_text())
    time.sleep(0.5)  # the query is running now
    process.terminate()
    assert process.wait(timeout=60) == 128 + signal.SIGTERM
    deadline = time.monotonic() + 30
    while pid_alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(server_pid), "the embedded server outlived the command that started it"


def test_toolchain_commands_refuse_what_they_cannot_do_in_one_line(embedded_env: dict[str, str]) -> None:
    assert run(embedded_env, "init").exit_code == 0
    listed = json.loads(run(embedded_env, "toolchain", "list", "--json").stdout)
    assert [(t["version"], t["status"]) for t in listed] == [("0.5.0", "known"), ("0.6.0", "active"),
                                                             ("0.7.0", "known")]  # fmt: skip
    assert_one_line_error(run(embedded_env, "toolchain", "upgrade", "9.9.9"), "unknown toolchain '9.9.9'")
    assert_one_line_error(run(embedded_env, "toolchain", "upgrade", "0.5.0"), "does not downgrade")
    assert_one_line_error(run(embedded_env, "toolchain", "upgrade", "0.6.0"), "already the active toolchain")
    # kernels optimized under the active toolchain are not optimized under another one behind its back
    with EmbeddedStore(Path(embedded_env["CHIPLORE_DATA_DIR"])) as store:
        register_kernel(store, Kernel(name="k", target="simrngd", weight_bytes=1, bound_cycles=1.0))
        activity = record_activity(store, Activity(id="a", role="runner", policy="builtin"))
        add_design(store, DesignNode(id="d", kernel="k", role="baseline", policy="official", depth=0),
                   version=KernelVersion(sha="s", kernel="k", source="", toolchain="0.6.0"), parent=None,
                   activity=activity)  # fmt: skip
        set_best(store, "k", "d", status="accepted")
    assert_one_line_error(run(embedded_env, "optimize", "--toolchain", "0.7.0"), "chiplore toolchain upgrade 0.7.0")


def assert_usage_error(result: Result, needle: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], result.stderr
    assert "Traceback" not in result.output


def test_bad_input_is_one_line_before_anything_is_spent(tmp_path: Path, embedded_env: dict[str, str]) -> None:
    not_a_folder = tmp_path / "a-file"
    not_a_folder.write_text("")
    assert_one_line_error(run({**embedded_env, "CHIPLORE_DATA_DIR": str(not_a_folder)}, "status"), "is a file")
    missing = tmp_path / "mistyped"
    assert_one_line_error(run({**embedded_env, "CHIPLORE_DATA_DIR": str(missing)}, "status"), "no chiplore graph")
    assert not missing.exists()  # a mistyped data dir is not a new empty graph
    assert run(embedded_env, "init").exit_code == 0
    for value in ("nan", "inf", "-5", "ten", "0"):  # 0 passed here and was refused as `budget_s` later
        assert_usage_error(run(embedded_env, "optimize", "--budget", value), "--budget")
    assert_one_line_error(run(embedded_env, "optimize", "no_such_kernel", "--budget", "60"), "unknown kernel")
    spent = json.loads(run(embedded_env, "status", "--graph", "--json").stdout)["device_s"]
    assert spent == 0.0  # nothing reached the device


def test_cypher_refuses_files_and_admin_and_cuts_big_answers(env: dict[str, str]) -> None:
    run(env, "init")
    for query in (
        "LOAD CSV FROM 'file:///etc/passwd' AS row RETURN row",
        "TERMINATE TRANSACTIONS 'neo4j-transaction-1'",
    ):
        result = run(env, "cypher", query)
        assert result.exit_code == 1 and "root:" not in result.output, result.output
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output
    big = run(env, "cypher", "UNWIND range(1, 5000) AS n RETURN n", "--max-rows", "10", "--json")
    assert big.exit_code == 0 and len(json.loads(big.stdout)) == 10
    assert "cut" in big.stderr


def test_an_optimize_where_no_kernel_could_start_exits_1(embedded_env: dict[str, str], tmp_path: Path) -> None:
    """One cluster of 128 slices and nothing learnt: neither the official baseline nor the space's first
    design (written for the documented shape) compiles, so the kernel stops before any device job. A user's
    script read the run's exit 0 as success; the table and the stop reason still print."""
    chip = tmp_path / "chip.toml"
    chip.write_text("[shape]\nclusters = 1\nslices = 128\n")
    env = {**embedded_env, "CHIPLORE_SIM_TRUTH": str(chip)}
    assert run(env, "init").exit_code == 0
    stopped = run(env, "optimize", "sliding_attention_output", "--budget", "30")
    assert stopped.exit_code == 1 and "sliding_attention_output stopped: the official baseline does not compile" in (
        stopped.stdout
    ), stopped.output
    as_json = run(env, "optimize", "sliding_attention_output", "--budget", "30", "--json")
    assert as_json.exit_code == 1 and json.loads(as_json.stdout)["kernels"][0]["best_design"] is None
