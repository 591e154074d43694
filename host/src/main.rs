//! The `vak` command: run, inspect and list sandboxed tools.

mod cli;

/// mimalloc instead of the system's allocator: under 32 calls in flight glibc's `malloc`, `free`
/// and their helpers were about 15 % of the server's samples, and with mimalloc the same server
/// answers 26-50 % more calls a second (docs/PERFORMANCE.md). The library leaves the choice to its host.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_arena_eager_commit` (the fifth of `mi_option_t`, in v2 and v3 alike).
/// Committing arenas eagerly, its default where the system overcommits (Linux), left the idle
/// server at 46-48 MB of RSS instead of 36 MB, and bought no throughput.
#[cfg(target_os = "linux")]
const ARENA_EAGER_COMMIT: libmimalloc_sys::mi_option_t = 4;

/// Sets the option before anything allocates: Rust's runtime allocates before `main`, and the
/// first allocation makes mimalloc's first arena. `.init_array.00100` runs after the C runtime
/// is set up and before constructors without a priority (mimalloc's own, and any that could
/// allocate through Rust).
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array.00100")]
static SET_ALLOCATOR_OPTIONS: extern "C" fn() = set_allocator_options;

#[cfg(target_os = "linux")]
extern "C" fn set_allocator_options() {
    // SAFETY: `mi_option_set` stores the option's value and marks it set, in mimalloc's static
    // table of options; it allocates nothing and needs no initialisation before it, and any value
    // of this option is valid.
    unsafe { libmimalloc_sys::mi_option_set(ARENA_EAGER_COMMIT, 0) };
}

fn main() -> std::process::ExitCode {
    cli::main()
}
