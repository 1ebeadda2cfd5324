# lit configuration of the .fg FileCheck tests. Run through the generated
# lit.site.cfg.py in the build tree (ctest -R ir-filecheck), which sets
# config.fusegraph, config.llvm_tools_dir, config.fg_source_dir and
# config.fg_binary_dir before loading this file.
#
# In RUN lines: %fusegraph is the tool; FileCheck and not are LLVM's.
import os

import lit.formats

config.name = "fusegraph-ir"
config.test_format = lit.formats.ShTest(execute_external=True)
config.suffixes = [".fg"]
# Inputs/ holds files that tests read, not tests.
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py.in"]

config.test_source_root = config.fg_source_dir
config.test_exec_root = config.fg_binary_dir


def tool_pattern(name):
    # The tool name as a command word, not inside a path, flag or file name.
    return r"(?<![\w./-])" + name + r"(?![\w.-])"


config.substitutions.append(("%fusegraph", config.fusegraph))
config.substitutions.append(
    (tool_pattern("FileCheck"), os.path.join(config.llvm_tools_dir, "FileCheck")))
config.substitutions.append((tool_pattern("not"), os.path.join(config.llvm_tools_dir, "not")))

# The tools' own directory first, for anything a test runs by name.
config.environment["PATH"] = os.pathsep.join(
    [config.llvm_tools_dir, config.environment.get("PATH", os.environ.get("PATH", ""))])

# "gpu" when nvidia-smi lists a device, else "no-gpu": the few RUN lines whose
# output depends on it (--device cuda without a GPU, auto's note) live in
# files that REQUIRE one or the other, so ctest passes on the GPU machine too.
import shutil
import subprocess


def has_gpu():
    smi = shutil.which("nvidia-smi")
    if not smi:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


config.available_features.add("gpu" if has_gpu() else "no-gpu")
