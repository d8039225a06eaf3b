"""`culina-resolver manifest init/add`: the release scripts' writer, read back by the same parser."""

import hashlib
import json
import subprocess

import release_server

TAG = "cp312-cp312-manylinux_2_28_x86_64"


def run(resolver, *args):
    return subprocess.run([str(resolver), "manifest", *args], capture_output=True, text=True, timeout=30)


def write_wheel(folder, variant, name="culina", seed=0):
    path = folder / f"{name}-0.1.0-{TAG}-{variant}.whl"
    path.write_bytes(release_server.build_wheel(name=name, seed=seed))
    return path


def test_init_then_add_writes_what_the_resolver_reads(resolver, tmp_path):
    manifest = tmp_path / "release-manifest.json"
    assert run(resolver, "init", "--manifest", str(manifest), "--name", "culina", "--version", "0.1.0").returncode == 0
    cu130 = write_wheel(tmp_path, "cu130")
    cpu = write_wheel(tmp_path, "null", seed=1)
    done = run(resolver, "add", "--manifest", str(manifest), "--wheel", str(cu130), "--cuda", "13.0",
               "--sass", "sm_75,sm_80,sm_90,sm_100,sm_120", "--ptx", "compute_120")
    assert done.returncode == 0, done.stderr
    assert run(resolver, "add", "--manifest", str(manifest), "--wheel", str(cpu)).returncode == 0

    data = json.loads(manifest.read_text())
    assert list(data) == ["schema_version", "name", "version", "wheels"]
    first, second = data["wheels"]
    assert first["sha256"] == hashlib.sha256(cu130.read_bytes()).hexdigest()
    assert first["size"] == cu130.stat().st_size
    assert first["tags"] == [TAG] and first["variant"] == "cu130" and first["cuda"] == "13.0"
    assert "nvidia :: sm_arch :: 120_virtual" in first["variant_properties"]
    assert second["variant"] == "null" and second["cuda"] is None and second["variant_properties"] == []

    tags = tmp_path / "tags"
    tags.write_text(TAG + "\n")
    select = subprocess.run([str(resolver), "select", "--manifest", str(manifest), "--tags", str(tags), "--json"],
                            env={"CULINA_OVERRIDE_CUDA": "13.0", "CULINA_OVERRIDE_SM": "9.0", "PATH": "/usr/bin:/bin"},
                            capture_output=True, text=True, timeout=60)
    assert select.returncode == 0, select.stderr
    assert json.loads(select.stdout)["wheel"]["file"] == cu130.name


def test_adding_the_same_file_again_replaces_its_entry(resolver, tmp_path):
    manifest = tmp_path / "m.json"
    run(resolver, "init", "--manifest", str(manifest), "--name", "culina", "--version", "0.1.0")
    wheel = write_wheel(tmp_path, "cu130")
    for _ in range(2):
        assert run(resolver, "add", "--manifest", str(manifest), "--wheel", str(wheel), "--cuda", "13.0",
                   "--sass", "sm_90").returncode == 0
    assert len(json.loads(manifest.read_text())["wheels"]) == 1


def test_claims_the_parser_would_refuse_are_refused_and_nothing_is_written(resolver, tmp_path):
    manifest = tmp_path / "m.json"
    run(resolver, "init", "--manifest", str(manifest), "--name", "culina", "--version", "0.1.0")
    before = manifest.read_text()
    wheel = write_wheel(tmp_path, "cu130")
    old_arch = run(resolver, "add", "--manifest", str(manifest), "--wheel", str(wheel), "--cuda", "13.0", "--sass", "sm_70")
    assert old_arch.returncode == 1 and "sm_70" in old_arch.stderr and "sm_75 and newer" in old_arch.stderr
    other = write_wheel(tmp_path, "cu130", name="other")
    wrong_project = run(resolver, "add", "--manifest", str(manifest), "--wheel", str(other), "--cuda", "13.0", "--sass", "sm_90")
    assert wrong_project.returncode == 1 and "other" in wrong_project.stderr
    assert manifest.read_text() == before


def test_usage_errors_name_the_option(resolver, tmp_path):
    done = run(resolver, "add", "--manifest", str(tmp_path / "m.json"), "--wheels", "x")
    assert done.returncode == 2 and "--wheels" in done.stderr
