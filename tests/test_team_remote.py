"""The team workflow through a real DVC remote (issue 32, item 5): clone A runs and pushes to an S3
server, clone B pulls and sees the same numbers, and `releval audit --all` checks every link.

The server is moto's standalone S3 server (``moto_server``, the test extra), started as a process on
127.0.0.1 and stopped at the end; DVC talks to it through dvc-s3 (the remote extra) exactly as it
would to AWS, MinIO or any S3-compatible store. The remote is configured as a user would: ``dvc
remote add -d`` and ``dvc remote modify ... endpointurl`` (committed), the credentials from the
environment in A and from ``dvc remote modify --local`` (.dvc/config.local, ignored by git) in B,
never in a committed file.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from releval import paths
from support import BIN, ROOT
from support.audited_project import CONFIGS, make_audited_project
from support.commands import ran_stages, run
from support.projects import output_bytes

pytestmark = pytest.mark.slow

BUCKET = "releval-team"
REMOTE_URL = f"s3://{BUCKET}/dvcstore"
KEY_ID, SECRET = "team-key-id", "team-secret-never-committed"
NOT_AVAILABLE = "  not available here"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def hermetic_aws_env(home: Path) -> dict[str, str]:
    """No AWS configuration of the machine's user, no instance-metadata probe, no proxy for loopback."""
    return {
        "AWS_CONFIG_FILE": str(home / "aws-config"),
        "AWS_SHARED_CREDENTIALS_FILE": str(home / "aws-credentials"),
        "AWS_EC2_METADATA_DISABLED": "true",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    }


@pytest.fixture
def s3_endpoint(tmp_path):
    """moto's S3 server on a free loopback port: its http:// endpoint, once it answers."""
    log = open(tmp_path / "moto_server.log", "w")
    env = {**os.environ, **hermetic_aws_env(tmp_path)}
    process = None
    for _ in range(3):  # a free port can be taken between the probe and the bind: try another
        port = free_port()
        process = subprocess.Popen(
            [str(BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        endpoint = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(endpoint, timeout=2):
                    break
            except OSError:
                time.sleep(0.2)
        if process.poll() is None:
            break
    assert process is not None and process.poll() is None, (tmp_path / "moto_server.log").read_text()
    try:
        yield endpoint
    finally:
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(30)
        log.close()


def s3_client(endpoint: str):
    import boto3

    return boto3.client(
        "s3", endpoint_url=endpoint, aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET, region_name="us-east-1"
    )


def not_available(audit_output: str) -> list[str]:
    return [line for line in audit_output.splitlines() if line.startswith(NOT_AVAILABLE)]


@pytest.mark.heavy  # a grid repro'd, pushed, pulled and audited in a second clone: about 90 s
def test_clone_a_pushes_clone_b_pulls_the_same_numbers_and_audits_every_link(tmp_path, s3_endpoint):
    s3 = s3_client(s3_endpoint)
    s3.create_bucket(Bucket=BUCKET)
    aws = hermetic_aws_env(tmp_path)
    with_keys = {**aws, "AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET}

    # Clone A: the pipeline run and committed, then a remote on the S3 server, pushed.
    a = make_audited_project(tmp_path / "a")
    run(["dvc", "remote", "add", "-d", "storage", REMOTE_URL], a)
    run(["dvc", "remote", "modify", "storage", "endpointurl", s3_endpoint], a)
    run(["git", "commit", "-qm", "the team's DVC remote", "--", ".dvc/config"], a)
    pushed = run(["dvc", "push"], a, env_extra=with_keys)
    assert "files pushed" in pushed.stdout, pushed.stdout + pushed.stderr
    in_sync = run(["dvc", "status", "-c"], a, env_extra=with_keys)
    assert "Cache and remote 'storage' are in sync." in in_sync.stdout, in_sync.stdout
    stored = s3.list_objects_v2(Bucket=BUCKET, Prefix="dvcstore/")
    assert stored["KeyCount"] > 0 and all(o["Key"].startswith("dvcstore/files/md5/") for o in stored["Contents"])
    assert SECRET not in (a / ".dvc" / "config").read_text()
    assert not run(["git", "grep", "-l", SECRET], a, check=False).stdout

    # Clone B: a teammate's git clone (the model wheels as `make setup` downloads them).
    b = tmp_path / "b"
    run(["git", "clone", "-q", str(a), str(b)], tmp_path)
    (b / paths.WHEELS).symlink_to(ROOT / paths.WHEELS, target_is_directory=True)
    before = run(["releval", "audit", "--all"], b)
    assert "BROKEN" not in before.stdout and "result: OK (" in before.stdout, before.stdout
    assert any("data/work/runs/" in line for line in not_available(before.stdout)), before.stdout

    # B's credentials in .dvc/config.local (ignored by git), not in its environment.
    run(["dvc", "remote", "modify", "--local", "storage", "access_key_id", KEY_ID], b)
    run(["dvc", "remote", "modify", "--local", "storage", "secret_access_key", SECRET], b)
    assert SECRET not in (b / ".dvc" / "config").read_text()
    pulled = run(["dvc", "pull"], b, env_extra=aws)
    assert "files fetched" in pulled.stdout, pulled.stdout + pulled.stderr
    assert not run(["git", "status", "--porcelain"], b).stdout  # config.local stays out of git

    # The same bytes: every report, and every DVC output in data/work.
    assert output_bytes(b, ("reports", "data/work")) == output_bytes(a, ("reports", "data/work"))
    grid_a, grid_b = (run(["releval", "compare", "--grid"], clone).stdout for clone in (a, b))
    assert grid_b == grid_a and all(config in grid_b for config in CONFIGS)

    # Every link available but the model folders, which DVC does not cache (dvc.yaml: cache: false):
    # `dvc repro` extracts them from the wheels, runs nothing else, and then the audit has every link.
    after = run(["releval", "audit", "--all"], b)
    assert "BROKEN" not in after.stdout and "result: OK" in after.stdout, after.stdout
    missing = not_available(after.stdout)
    assert all(" data/models/" in line for line in missing), missing
    repro = run(["dvc", "repro"], b)
    assert ran_stages(repro.stdout) <= {"model@wordllama"}, repro.stdout
    assert not run(["git", "status", "--porcelain"], b).stdout  # dvc.lock as A committed it
    complete = run(["releval", "audit", "--all"], b)
    assert not not_available(complete.stdout), complete.stdout
    assert complete.stdout.rstrip().endswith("result: OK"), complete.stdout
