// Every parser the probe uses, on real-world text and on malformed input.
#include <gtest/gtest.h>

#include "common/text.h"
#include "probe/cpu_probe.h"
#include "probe/cuda_driver_probe.h"
#include "probe/driver_version.h"
#include "probe/os_probe.h"
#include "probe/toolkit_probe.h"

namespace culina {
namespace {

using namespace std::string_literals;  // the child's records end in NUL

TEST(DriverVersion, ReadsSysfsModuleVersion) {
    EXPECT_EQ(parse_nvidia_module_version("580.159.04\n"), "580.159.04");
    EXPECT_EQ(parse_nvidia_module_version("535.54"), "535.54");
}

TEST(DriverVersion, RejectsMalformedSysfsText) {
    for (const char* bad : {"", "\n", "580", "580.x.04", "v580.159.04", "580.159.04.1.2", "580..04"}) {
        EXPECT_FALSE(parse_nvidia_module_version(bad).has_value()) << bad;
    }
}

TEST(DriverVersion, ReadsProcfsKernelModuleLine) {
    const char* text =
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct  9 12:30:11 UTC 2025\n"
        "GCC version:  gcc version 13.3.0 (Ubuntu 13.3.0-6ubuntu2~24.04)\n";
    EXPECT_EQ(parse_proc_driver_version(text), "580.159.04");
    const char* open_module =
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.14  Release Build  (dvs-builder@U16)\n";
    EXPECT_EQ(parse_proc_driver_version(open_module), "550.54.14");
}

TEST(DriverVersion, RejectsProcfsTextWithoutVersion) {
    EXPECT_FALSE(parse_proc_driver_version("").has_value());
    EXPECT_FALSE(parse_proc_driver_version("GCC version: gcc version 13.3.0\n").has_value());
    EXPECT_FALSE(parse_proc_driver_version("NVRM version: NVIDIA UNIX x86_64 Kernel Module\n").has_value());
}

TEST(NvccVersion, ReadsReleaseLine) {
    const char* text =
        "nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
        "Built on Wed_Aug_20_01:58:59_PM_PDT_2025\nCuda compilation tools, release 13.0, V13.0.88\n"
        "Build cuda_13.0.r13.0/compiler.36424714_0\n";
    EXPECT_EQ(parse_nvcc_version(text), (CudaVersion{13, 0}));
    EXPECT_EQ(parse_nvcc_version("Cuda compilation tools, release 12.9, V12.9.86"), (CudaVersion{12, 9}));
}

TEST(NvccVersion, RejectsTextWithoutRelease) {
    EXPECT_FALSE(parse_nvcc_version("").has_value());
    EXPECT_FALSE(parse_nvcc_version("nvcc: command not found").has_value());
    EXPECT_FALSE(parse_nvcc_version("Cuda compilation tools, release x.y, V1").has_value());
}

TEST(Libc, ReadsGlibcConfstr) {
    const std::optional<LibcInfo> libc = parse_gnu_libc_version("glibc 2.36");
    ASSERT_TRUE(libc.has_value());
    EXPECT_EQ(libc->name, "glibc");
    EXPECT_EQ(libc->version, "2.36");
    EXPECT_EQ(parse_gnu_libc_version("glibc 2.39")->version, "2.39");
}

TEST(Libc, RejectsMalformedGlibcText) {
    for (const char* bad : {"", "glibc", "musl 1.2.4", "glibc 2", "glibc two.36", "glibc 2.36a"}) {
        EXPECT_FALSE(parse_gnu_libc_version(bad).has_value()) << bad;
    }
}

TEST(Libc, ReadsMuslLoaderBanner) {
    const std::optional<LibcInfo> libc =
        parse_musl_loader_banner("musl libc (x86_64)\nVersion 1.2.4\nDynamic Program Loader\n");
    ASSERT_TRUE(libc.has_value());
    EXPECT_EQ(libc->name, "musl");
    EXPECT_EQ(libc->version, "1.2.4");
    EXPECT_FALSE(parse_musl_loader_banner("ld.so: not a musl loader").has_value());
}

TEST(Libc, AMuslVersionIsShownAsData) {
    const std::optional<LibcInfo> libc = parse_musl_loader_banner("musl libc\nVersion 1.2.4\x1b]0;owned\x07\xff\n");
    ASSERT_TRUE(libc.has_value());
    EXPECT_EQ(libc->version, "1.2.4\\x1b]0;owned\\x07\xef\xbf\xbd");
}

TEST(OsHints, RecognisesWslKernelsAndContainerCgroups) {
    EXPECT_TRUE(kernel_release_is_wsl("5.15.153.1-microsoft-standard-WSL2"));
    EXPECT_TRUE(kernel_release_is_wsl("4.4.0-19041-Microsoft"));
    EXPECT_FALSE(kernel_release_is_wsl("6.8.0-45-generic"));
    EXPECT_TRUE(cgroup_names_container("12:cpu:/docker/3f1c2e\n"));
    EXPECT_TRUE(cgroup_names_container("0::/kubepods/besteffort/pod1\n"));
    EXPECT_FALSE(cgroup_names_container("0::/init.scope\n"));
}

TEST(Cpu, ReadsX86ProcCpuinfo) {
    const char* text =
        "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n"
        "flags\t\t: fpu pni ssse3 sse4_1 sse4_2 popcnt cx16 lahf_lm avx avx2 bmi1 bmi2 f16c fma abm movbe xsave\n"
        "processor\t: 1\nvendor_id\t: GenuineIntel\nflags\t\t: fpu\n";
    const CpuInfo cpu = parse_proc_cpuinfo(text, "x86_64");
    EXPECT_EQ(cpu.vendor, "GenuineIntel");
    EXPECT_EQ(cpu.model, "Intel(R) Xeon(R) Platinum 8480+");
    EXPECT_EQ(cpu.isa_level, "x86-64-v3");
    EXPECT_NE(std::find(cpu.features.begin(), cpu.features.end(), "lzcnt"), cpu.features.end());
    EXPECT_EQ(std::find(cpu.features.begin(), cpu.features.end(), "fpu"), cpu.features.end());
}

// In a container /proc/cpuinfo may be whatever a FUSE file serves.
TEST(Cpu, NamesFromProcCpuinfoAreShownAsData) {
    const CpuInfo cpu = parse_proc_cpuinfo(
        "vendor_id\t: Genuine\x1b[31mIntel\nmodel name\t: Evil\xff " + std::string(1000, 'x') + "\nflags\t\t: avx2\n",
        "x86_64");
    EXPECT_EQ(cpu.vendor, "Genuine\\x1b[31mIntel");
    EXPECT_TRUE(starts_with(cpu.model, "Evil\xef\xbf\xbd xxx"));
    EXPECT_TRUE(ends_with(cpu.model, kCutMarker));
    EXPECT_EQ(cpu.features, std::vector<std::string>{"avx2"});
}

TEST(Cpu, IsaLevelsFollowThePsAbi) {
    const std::vector<std::string> v2 = {"cx16", "lahf", "popcnt", "sse3", "sse4.1", "sse4.2", "ssse3"};
    std::vector<std::string> v3 = v2;
    v3.insert(v3.end(), {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "lzcnt", "movbe", "xsave"});
    std::vector<std::string> v4 = v3;
    v4.insert(v4.end(), {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"});
    EXPECT_EQ(x86_isa_level({}), "x86-64");
    EXPECT_EQ(x86_isa_level(v2), "x86-64-v2");
    EXPECT_EQ(x86_isa_level(v3), "x86-64-v3");
    EXPECT_EQ(x86_isa_level(v4), "x86-64-v4");
    std::vector<std::string> v3_without_movbe = v3;
    v3_without_movbe.erase(std::find(v3_without_movbe.begin(), v3_without_movbe.end(), "movbe"));
    EXPECT_EQ(x86_isa_level(v3_without_movbe), "x86-64-v2");
}

TEST(Cpu, ReadsArmProcCpuinfo) {
    const char* text =
        "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid "
        "asimdrdm lrcpc dcpop asimddp sve sve2\nCPU implementer\t: 0x41\nCPU part\t: 0xd4f\n";
    const CpuInfo cpu = parse_proc_cpuinfo(text, "aarch64");
    EXPECT_EQ(cpu.vendor, "ARM");
    EXPECT_EQ(cpu.model, "part 0xd4f");
    EXPECT_EQ(cpu.isa_level, "armv9-a");
    EXPECT_EQ(arm_isa_level({"fp", "asimd", "atomics", "asimdrdm", "asimdhp", "dcpop"}), "armv8.2-a");
    EXPECT_EQ(arm_isa_level({"fp", "asimd"}), "armv8-a");
}

TEST(LibcudaReport, ReadsLibraryVersionAndEveryGpu) {
    const CudaDriverReport report = parse_libcuda_report(
        "library /usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04\0driver_cuda 13000\0"
        "gpu 0 9 0 NVIDIA H200\0gpu 1 8 6 NVIDIA GeForce RTX 3090\0"s);
    EXPECT_TRUE(report.library_found);
    EXPECT_EQ(report.cuda, (CudaVersion{13, 0}));
    ASSERT_EQ(report.gpus.size(), 2u);
    EXPECT_EQ(report.gpus[1].name, "NVIDIA GeForce RTX 3090");
    EXPECT_EQ(report.gpus[1].sm, (ComputeCapability{8, 6}));
    EXPECT_TRUE(report.errors.empty());
}

TEST(LibcudaReport, StubLibraryIsAnErrorAndNoDriver) {
    const CudaDriverReport by_code = parse_libcuda_report(
        "library /opt/libcuda.so.1\0driver_cuda 13000\0init_error 34 CUDA_ERROR_STUB_LIBRARY\0"s);
    EXPECT_FALSE(by_code.cuda.has_value());
    ASSERT_EQ(by_code.errors.size(), 1u);
    EXPECT_NE(by_code.errors[0].find("stub"), std::string::npos);

    const CudaDriverReport by_path =
        parse_libcuda_report("library /usr/local/cuda/lib64/stubs/libcuda.so.1\0driver_cuda 13000\0"s);
    EXPECT_FALSE(by_path.cuda.has_value());
    EXPECT_EQ(by_path.errors.size(), 1u);
}

TEST(LibcudaReport, InitFailureKeepsTheDriverVersion) {
    const CudaDriverReport report =
        parse_libcuda_report("library /lib/libcuda.so.1\0driver_cuda 12080\0init_error 999 CUDA_ERROR_UNKNOWN\0"s);
    EXPECT_EQ(report.cuda, (CudaVersion{12, 8}));
    EXPECT_TRUE(report.gpus.empty());
    ASSERT_EQ(report.errors.size(), 1u);
    EXPECT_NE(report.errors[0].find("CUDA_ERROR_UNKNOWN (999)"), std::string::npos);
}

TEST(LibcudaReport, MissingLibraryIsNotAnError) {
    const CudaDriverReport report = parse_libcuda_report("missing libcuda.so.1: cannot open shared object file\0"s);
    EXPECT_FALSE(report.library_found);
    EXPECT_TRUE(report.errors.empty());
}

// A name is the driver's bytes: a newline in it forges no GPU, and what is kept is printable.
TEST(LibcudaReport, AHostileNameIsOneGpuShownAsData) {
    const CudaDriverReport report = parse_libcuda_report(
        "library /lib/libcuda.so.1\0driver_cuda 13000\0gpu 0 9 0 Evil\xff\ngpu 7 12 0 forged\x1b[2J\0"s);
    ASSERT_EQ(report.gpus.size(), 1u);
    EXPECT_EQ(report.gpus[0].sm, (ComputeCapability{9, 0}));
    EXPECT_EQ(report.gpus[0].name, "Evil\xef\xbf\xbd\\x0agpu 7 12 0 forged\\x1b[2J");
}

TEST(LibcudaReport, ALongNameIsCut) {
    const CudaDriverReport report = parse_libcuda_report("gpu 0 9 0 " + std::string(4000, '\n') + '\0');
    ASSERT_EQ(report.gpus.size(), 1u);
    EXPECT_LE(report.gpus[0].name.size(), kForeignTextLimit + std::string(kCutMarker).size());
    EXPECT_TRUE(ends_with(report.gpus[0].name, kCutMarker));
}

}  // namespace
}  // namespace culina
