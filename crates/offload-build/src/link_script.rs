//! The linker rustc runs at the end of the device build.
//!
//! rustc's nvptx64 target links with the `llbc` flavour: it runs `llvm-bitcode-linker`, which
//! rustup ships only as an optional component and Debian not at all. This sh script accepts the
//! same arguments and does the same job with `llvm-link`, `opt` and `llc`:
//!
//! ```text
//! --export-symbol NAME ...  <objects> <rlibs>  -L DIR ...  --target nvptx64-nvidia-cuda
//! --target-cpu sm_90  -o OUT.ptx  -O3  --debug
//! ```
//!
//! Objects and rlib members are LLVM bitcode on this target. After fat LTO only
//! `compiler_builtins` still arrives as an rlib (it is never part of LTO); `llvm-link` reads
//! archives itself and `--ignore-non-bitcode` skips their `lib.rmeta` member.

use crate::sh_quote::sh_quote;
use std::path::Path;

pub(crate) fn path_str(p: &Path) -> &str {
    p.to_str()
        .unwrap_or_else(|| panic!("offload-build: path {} is not UTF-8", p.display()))
}

/// The script's text, with the tools' absolute paths baked in: rustc's bitcode to PTX.
pub(crate) fn render(llvm_link: &Path, opt: &Path, llc: &Path) -> String {
    let mut s = head(llvm_link, opt, llc);
    s.push_str(LINK_OBJECTS);
    s.push_str(PTX_TAIL);
    s
}

/// The shebang, the tools and the argument parsing, shared by every target's script.
pub(crate) fn head(llvm_link: &Path, opt: &Path, llc: &Path) -> String {
    let mut s = String::from("#!/bin/sh\n");
    s.push_str(
        "# Written by offload-build (regenerated on each build): stands in for llvm-bitcode-linker as\n\
         # the nvptx64 linker. Set OFFLOAD_LINK_TRACE=1 to print the arguments rustc passes.\n",
    );
    s.push_str("set -eu\n");
    s.push_str(&format!("LLVM_LINK={}\n", sh_quote(path_str(llvm_link))));
    s.push_str(&format!("OPT={}\n", sh_quote(path_str(opt))));
    s.push_str(&format!("LLC={}\n", sh_quote(path_str(llc))));
    s
}

/// Parses rustc's arguments and links its bitcode objects into `$work/objects.bc`; leaves the
/// libraries as `$work/lib*.a`, the exports in `$exports`, the output in `$out`, the levels in
/// `$olevel` and `$llc_olevel`, the CPU and features in `$cpu` and `$features`.
pub(crate) const LINK_OBJECTS: &str = r#"
if [ -n "${OFFLOAD_LINK_TRACE:-}" ]; then
    printf 'offload-link:' >&2
    printf ' [%s]' "$@" >&2
    printf '\n' >&2
fi
fail() {
    echo "offload-link: $*" >&2
    exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/offload-link.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Inputs are linked through numbered symlinks in $work: sh has no arrays, and a glob over them
# keeps paths with spaces intact and the order rustc gave.
out=
cpu=
features=
olevel=3
fp_contract=off
fast_all=0
# The panic record and its host-flag pointer are looked up by name at run time: always keep them,
# whether or not rustc lists a dependency's #[no_mangle] statics.
exports=OFFLOAD_PANIC_RECORD,OFFLOAD_PANIC_FLAG_PTR
n=1000
while [ $# -gt 0 ]; do
    case $1 in
        --export-symbol) exports="$exports${exports:+,}$2"; shift 2 ;;
        --export-symbol=*) exports="$exports${exports:+,}${1#*=}"; shift ;;
        --target) [ "$2" = nvptx64-nvidia-cuda ] || fail "unsupported target $2"; shift 2 ;;
        --target=*) [ "${1#*=}" = nvptx64-nvidia-cuda ] || fail "unsupported target ${1#*=}"; shift ;;
        --target-cpu) cpu=$2; shift 2 ;;
        --target-cpu=*) cpu=${1#*=}; shift ;;
        --target-feature) features=$2; shift 2 ;;
        --target-feature=*) features=${1#*=}; shift ;;
        # Library directories: rustc passes every input as a full path anyway.
        -L) shift 2 ;;
        -L*) shift ;;
        -o) out=$2; shift 2 ;;
        -O0|-O1|-O2|-O3|-Os|-Oz) olevel=${1#-O}; shift ;;
        # "Keep debug info": rustc sends it whenever stripping is off; nothing to do.
        --debug) shift ;;
        # offload-build's Kernels::fma_contraction(true), passed as a link argument.
        --fma-contraction) fp_contract=fast; shift ;;
        # offload-build's Kernels::fast_math(true): every function as a `fastmath` entry (below).
        --fast-math) fp_contract=fast; fast_all=1; shift ;;
        -*) fail "unexpected argument $1" ;;
        *)
            n=$((n + 1))
            case $1 in
                *.rlib|*.a) ln -s "$1" "$work/lib$n.a" ;;
                *) ln -s "$1" "$work/obj$n.o" ;;
            esac
            shift ;;
    esac
done
[ -n "$out" ] || fail "no -o OUTPUT given"

set -- "$work"/obj*.o
[ -e "$1" ] || fail "no bitcode objects given"
"$LLVM_LINK" "$@" -o "$work/objects.bc" || fail "llvm-link failed"

case $olevel in
    s|z) llc_olevel=2 ;;
    *) llc_olevel=$olevel ;;
esac
"#;

/// Shared memory, libraries, optimisation and `llc` for nvptx64.
const PTX_TAIL: &str = r#"
# Shared memory. Rust cannot place a static in PTX's shared state space, so kernels declare
# `extern` byte arrays named __offload_shared_* (offload::shared!), and this module defines each
# in addrspace(3); llvm-link turns their uses into address-space casts. It also defines
# __offload_dyn_shared_base, the generic address of the launch's dynamic shared memory.
"$LLVM_LINK" -S "$work/objects.bc" -o "$work/objects.ll" || fail "llvm-link failed"
{
    grep '^target ' "$work/objects.ll" || true
    sed -n 's/^\(@"\{0,1\}__offload_shared_[^ ]*\) = external .*global \(\[[0-9]* x i8\]\).*/\1 = addrspace(3) global \2 undef, align 16/p' \
        "$work/objects.ll" | sort -u
    echo '@__offload_dyn_shared = external addrspace(3) global [0 x i8], align 16'
    echo 'define ptr @__offload_dyn_shared_base() alwaysinline {'
    echo '  ret ptr addrspacecast (ptr addrspace(3) @__offload_dyn_shared to ptr)'
    echo '}'
} > "$work/shared.ll"
"$LLVM_LINK" "$work/objects.bc" "$work/shared.ll" -o "$work/main.bc" \
    || fail "llvm-link of the shared-memory definitions failed"

# Libraries only contribute what the objects still need (compiler_builtins).
set -- "$work"/lib*.a
if [ -e "$1" ]; then
    "$LLVM_LINK" --ignore-non-bitcode --only-needed "$work/main.bc" "$@" -o "$work/linked.bc" \
        || fail "llvm-link of libraries failed"
else
    mv "$work/main.bc" "$work/linked.bc"
fi

# Everything but the exports becomes internal, so the optimizer can inline and drop it.
# (opt rejects -O3 next to -passes, hence default<O3> in the pipeline.) A loop over a Rust slice
# iterator compares pointers, and at LLVM's default expansion budget (4) its trip count counts as
# too costly to compute, so the runtime unrolling that NVPTX asks for never happens; nvcc
# unrolls the same loops by 4. Budget 8 lets LLVM unroll them (docs/PERFORMANCE.md, fast math).
"$OPT" -scev-cheap-expansion-budget=8 "--internalize-public-api-list=$exports" "-passes=internalize,default<O$olevel>" \
    "$work/linked.bc" -S -o "$work/opt.ll" || fail "opt failed"

# A kernel's entries sit in a section that names its code options (offload-macros'
# KernelOptions::entry_section): `.offload`, then `.fma`, `.fastmath` and `.maxnreg<N>` as given.
# `fma`: their float multiplies, adds and subtracts (with everything inlined into them) get LLVM's
# `contract` flag, which lets llc fuse them into FMAs. `fastmath` (every function, with
# --fast-math): `fma`, and flush to zero ("denormal-fp-math-f32"="preserve-sign": `.ftz` on every
# f32 instruction), and `afn arcp` on f32 divisions and `afn` on f32 square roots, which llc turns
# into `div.approx`, `sqrt.approx` and, for `1 / sqrt(x)`, `rsqrt.approx`. `maxnreg<N>`: the
# entry's name and N go to $work/maxnreg for the PTX step below. The section itself is dropped.
: > "$work/maxnreg"
awk -v caps="$work/maxnreg" -v fast_all="$fast_all" '
    /^define / {
        fma = fast_all; fast = fast_all
        if (match($0, / section "\.offload(\.[a-z0-9]+)+"/)) {
            words = substr($0, RSTART + 19, RLENGTH - 20)
            $0 = substr($0, 1, RSTART - 1) substr($0, RSTART + RLENGTH)
            match($0, /@[^(]*\(/)
            name = substr($0, RSTART + 1, RLENGTH - 2)
            gsub(/"/, "", name)
            n = split(words, word, ".")
            for (i = 1; i <= n; i++) {
                if (word[i] == "fma") fma = 1
                else if (word[i] == "fastmath") { fma = 1; fast = 1 }
                else if (word[i] ~ /^maxnreg[0-9]+$/) print name, substr(word[i], 8) > caps
            }
        }
        if (fast) sub(/ \{$/, " \"denormal-fp-math-f32\"=\"preserve-sign,preserve-sign\" {")
    }
    fma && /^  %[^ ]* = f(mul|add|sub) / { sub(/ = f(mul|add|sub) /, "& contract "); sub(/  contract /, " contract ") }
    fast && /^  %[^ ]* = fdiv [a-z ]*float / { sub(/ = fdiv /, "& afn arcp "); sub(/  afn/, " afn") }
    fast && / call [a-z ]*float @llvm\.sqrt\.f32\(/ { sub(/ call /, "& afn "); sub(/  afn/, " afn") }
    { print }
    /^}/ { fma = 0; fast = 0 }
' "$work/opt.ll" > "$work/contracted.ll" || fail "awk failed"
"$LLC" -mtriple=nvptx64-nvidia-cuda ${cpu:+"-mcpu=$cpu"} ${features:+"-mattr=$features"} \
    "-O$llc_olevel" "-fp-contract=$fp_contract" "$work/contracted.ll" -o "$work/llc.ptx" || fail "llc failed"

# `max_registers = N` kernels: PTX's `.maxnreg N` between each entry's parameters and its body,
# where nvcc writes it for __launch_bounds__/-maxrregcount; ptxas and the driver's JIT then keep
# every thread of the entry within N registers.
awk -v caps="$work/maxnreg" '
    BEGIN { while ((getline line < caps) > 0) { split(line, f, " "); cap[f[1]] = f[2] } }
    match($0, /^(\.visible )?\.entry [^(]+/) { entry = substr($0, RSTART, RLENGTH); sub(/.* /, "", entry) }
    /^\{/ && entry in cap { print ".maxnreg " cap[entry]; delete cap[entry] }
    /^\{/ { entry = "" }
    { print }
    END { for (k in cap) { print "offload-link: no PTX entry " k " for .maxnreg" > "/dev/stderr"; exit 1 } }
' "$work/llc.ptx" > "$out" || fail "writing .maxnreg failed"
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tools_are_baked_in() {
        let s = render(
            Path::new("/usr/bin/llvm-link-22"),
            Path::new("/usr/bin/opt-22"),
            Path::new("/opt/my llvm/llc"),
        );
        assert!(s.starts_with("#!/bin/sh\n"));
        assert!(s.contains("\nLLVM_LINK='/usr/bin/llvm-link-22'\n"));
        assert!(s.contains("\nOPT='/usr/bin/opt-22'\n"));
        assert!(s.contains("\nLLC='/opt/my llvm/llc'\n"));
    }

    /// Runs the script with stand-in tools that record their arguments, to check the argument
    /// handling without LLVM.
    #[cfg(unix)]
    #[test]
    fn argument_handling() {
        let tools = crate::fake_tools::FakeTools::new("offload-link-test");
        let dir = &tools.dir;
        let script = tools.executable(
            "offload-link",
            &render(&tools.tool("link"), &tools.tool("opt"), &tools.tool("llc")),
        );
        let obj = dir.join("k.rcgu.o");
        let rlib = dir.join("libcompiler_builtins-1.rlib");
        std::fs::write(&obj, b"").unwrap();
        std::fs::write(&rlib, b"").unwrap();
        let out = dir.join("k.ptx");
        let status = std::process::Command::new(&script)
            .env("TMPDIR", "/tmp")
            .args(["--export-symbol", "saxpy", "--export-symbol", "stencil"])
            .arg(&obj)
            .arg(&rlib)
            .args(["-L", "/x/raw-dylibs", "--target", "nvptx64-nvidia-cuda"])
            .args(["--target-cpu", "sm_90", "-L", "/sys/self-contained", "-o"])
            .arg(&out)
            .args(["-O3", "--debug"])
            .status()
            .unwrap();
        assert!(status.success());
        assert_eq!(
            tools.calls(),
            [
                "link W/obj1001.o -o W/objects.bc",
                "link -S W/objects.bc -o W/objects.ll",
                "link W/objects.bc W/shared.ll -o W/main.bc",
                "link --ignore-non-bitcode --only-needed W/main.bc W/lib1002.a -o W/linked.bc",
                "opt -scev-cheap-expansion-budget=8 --internalize-public-api-list=OFFLOAD_PANIC_RECORD,OFFLOAD_PANIC_FLAG_PTR,saxpy,stencil -passes=internalize,default<O3> W/linked.bc -S -o W/opt.ll",
                "llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90 -O3 -fp-contract=off W/contracted.ll -o W/llc.ptx",
            ]
        );
        // A target the script cannot handle is refused.
        let status = std::process::Command::new(&script)
            .arg(&obj)
            .args(["--target", "amdgcn-amd-amdhsa", "-o"])
            .arg(&out)
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(!status.success());
    }

    /// The optimised module's entry sections reach the PTX: `fma` contracts only its entry's
    /// float arithmetic, `maxnreg<N>` writes `.maxnreg N` into its entry and no other, and no
    /// section is left. Stand-in `opt` writes the module; stand-in `llc` writes an entry per
    /// `define` and echoes its float arithmetic as comments.
    #[cfg(unix)]
    #[test]
    fn entry_sections_reach_the_ptx() {
        let tools = crate::fake_tools::FakeTools::new("offload-link-sections");
        let module = "\
define ptx_kernel void @plain(ptr %p) unnamed_addr #0 {
  %a = fmul float %x, %y
  ret void
}
define ptx_kernel void @fused(ptr %p) unnamed_addr #0 section \".offload.fma\" {
  %a = fmul float %x, %y
  ret void
}
define ptx_kernel void @window__f64(ptr %p) unnamed_addr #0 section \".offload.fma.maxnreg24\" {
  %a = fadd double %x, %y
  ret void
}
define ptx_kernel void @\"window__f32\"(ptr %p) unnamed_addr #0 section \".offload.maxnreg200\" {
  %a = fadd float %x, %y
  ret void
}
";
        let opt = tools.executable(
            "opt",
            &format!(
                "#!/bin/sh\nwhile [ $# -gt 1 ]; do [ \"$1\" = -o ] && out=$2; shift; done\ncat > \"$out\" <<'EOF'\n{module}EOF\n"
            ),
        );
        let llc = tools.executable(
            "llc",
            r#"#!/bin/sh
while [ $# -gt 0 ]; do case $1 in -o) out=$2; shift 2 ;; *.ll) in=$1; shift ;; *) shift ;; esac; done
awk '
    /^define / { match($0, /@[^(]*\(/); n = substr($0, RSTART + 1, RLENGTH - 2); gsub(/"/, "", n)
                 print ".visible .entry " n "("; print "\t.param .u64 " n "_param_0"; print ")"; print "{" }
    /section/ { print "\t// left: " $0 }
    / = f(mul|add) / { print "\t//" $0 }
    /^}/ { print "\tret;"; print "}" }
' "$in" > "$out"
"#,
        );
        let script = tools.executable("offload-link", &render(&tools.tool("link"), &opt, &llc));
        let obj = tools.dir.join("k.rcgu.o");
        std::fs::write(&obj, b"").unwrap();
        let out = tools.dir.join("k.ptx");
        let status = std::process::Command::new(&script)
            .env("TMPDIR", "/tmp")
            .arg(&obj)
            .args(["--target", "nvptx64-nvidia-cuda", "-o"])
            .arg(&out)
            .status()
            .unwrap();
        assert!(status.success());
        let entry = |name: &str, cap: &str, op: &str| {
            format!(".visible .entry {name}(\n\t.param .u64 {name}_param_0\n){cap}\n{{\n\t//  %a = {op}\n\tret;\n}}\n")
        };
        assert_eq!(
            std::fs::read_to_string(&out).unwrap(),
            [
                entry("plain", "", "fmul float %x, %y"),
                entry("fused", "", "fmul contract float %x, %y"),
                entry(
                    "window__f64",
                    "\n.maxnreg 24",
                    "fadd contract double %x, %y"
                ),
                entry("window__f32", "\n.maxnreg 200", "fadd float %x, %y"),
            ]
            .concat()
        );
    }

    /// A `fastmath` entry gets contraction, flush to zero and approximate f32 division and
    /// square roots; other functions only with `--fast-math`. Stand-in `llc` copies the IR it
    /// is given to the output.
    #[cfg(unix)]
    #[test]
    fn fast_math_reaches_the_ir_llc_reads() {
        let tools = crate::fake_tools::FakeTools::new("offload-link-fast-math");
        let body = "  %m = fmul float %x, %y\n  %q = fdiv float %m, %z\n  %w = fdiv double %u, %v\n  %s = tail call float @llvm.sqrt.f32(float %q)\n  ret void\n}\n";
        let module = format!(
            "define ptx_kernel void @quick(ptr %p) unnamed_addr #0 section \".offload.fastmath\" {{\n{body}\
             define ptx_kernel void @plain(ptr %p) unnamed_addr #0 {{\n{body}"
        );
        let opt = tools.executable(
            "opt",
            &format!(
                "#!/bin/sh\nwhile [ $# -gt 1 ]; do [ \"$1\" = -o ] && out=$2; shift; done\ncat > \"$out\" <<'EOF'\n{module}EOF\n"
            ),
        );
        let llc = tools.executable(
            "llc",
            "#!/bin/sh\nflags=\nwhile [ $# -gt 0 ]; do case $1 in -o) out=$2; shift 2 ;; *.ll) in=$1; shift ;; *) flags=\"$flags// $1\n\"; shift ;; esac; done\n{ printf \"$flags\"; cat \"$in\"; } > \"$out\"\n",
        );
        let script = tools.executable("offload-link", &render(&tools.tool("link"), &opt, &llc));
        let obj = tools.dir.join("k.rcgu.o");
        std::fs::write(&obj, b"").unwrap();
        let run = |extra: &[&str]| {
            let out = tools.dir.join("k.ptx");
            let status = std::process::Command::new(&script)
                .env("TMPDIR", "/tmp")
                .arg(&obj)
                .args(["--target", "nvptx64-nvidia-cuda", "-o"])
                .arg(&out)
                .args(extra)
                .output()
                .unwrap();
            assert!(
                status.status.success(),
                "{}",
                String::from_utf8_lossy(&status.stderr)
            );
            std::fs::read_to_string(&out).unwrap()
        };
        let fast = "  %m = fmul contract float %x, %y\n  %q = fdiv afn arcp float %m, %z\n  %w = fdiv double %u, %v\n  %s = tail call afn float @llvm.sqrt.f32(float %q)\n  ret void\n}\n";
        let ftz = "\"denormal-fp-math-f32\"=\"preserve-sign,preserve-sign\"";
        let quick =
            format!("define ptx_kernel void @quick(ptr %p) unnamed_addr #0 {ftz} {{\n{fast}");
        let kernel_only = run(&[]);
        assert!(
            kernel_only.contains("// -fp-contract=off\n"),
            "{kernel_only}"
        );
        assert!(
            kernel_only.ends_with(&format!(
                "{quick}define ptx_kernel void @plain(ptr %p) unnamed_addr #0 {{\n{body}"
            )),
            "{kernel_only}"
        );
        let everywhere = run(&["--fast-math"]);
        assert!(
            everywhere.contains("// -fp-contract=fast\n"),
            "{everywhere}"
        );
        assert!(
            everywhere.ends_with(&format!(
                "{quick}define ptx_kernel void @plain(ptr %p) unnamed_addr #0 {ftz} {{\n{fast}"
            )),
            "{everywhere}"
        );
    }
}
