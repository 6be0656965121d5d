//! How many threads the kernels use.
//!
//! The kernels run on rayon's global pool, which is sized once per process,
//! on the first kernel call:
//!
//! ```text
//! kokoro_tvm_ext.set_num_threads(n >= 1) -> int
//! ```
//!
//! sizes the pool to `n` threads if no kernel has run yet and returns `n`; if
//! the pool runs `n` threads already, it returns `n`; otherwise it is a
//! ValueError naming the pool's size (rayon cannot resize a pool). Without a
//! call, the first kernel call sizes the pool from `TVM_NUM_THREADS`
//! ([`size_pool_from_env`]), so TVM's own thread count and ours agree; without
//! either, rayon's default applies (`RAYON_NUM_THREADS`, else one per core).
use tvm_ffi::{ensure, Any, AnyView, Function, Result, VALUE_ERROR};

use crate::args::Cursor;
use crate::interface;

/// The registered `kokoro_tvm_ext.set_num_threads`.
pub fn function() -> Function {
    Function::from_packed(|args: &[AnyView]| -> Result<Any> {
        let mut c = Cursor::new(&interface::SET_NUM_THREADS, args)?;
        let n = c.int_in("n", 1, 1 << 16)? as usize;
        c.finish()?;
        Ok(Any::from(set_num_threads(n)? as i64))
    })
}

/// Sizes the kernels' pool to `n` threads, or checks that it has `n` already.
pub fn set_num_threads(n: usize) -> Result<usize> {
    if rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build_global()
        .is_ok()
    {
        return Ok(n);
    }
    let current = rayon::current_num_threads();
    ensure!(
        current == n,
        VALUE_ERROR,
        "set_num_threads: the kernels' thread pool already runs {current} threads and cannot be resized; \
         ask for {n} threads before the first synthesis in this process (or set TVM_NUM_THREADS={n})"
    );
    Ok(n)
}

/// Sizes the pool from `TVM_NUM_THREADS` (an integer > 0) unless it exists.
/// Cheap after the first call: every kernel call runs it first, so the count
/// can still be chosen after the library loads.
pub fn size_pool_from_env() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let n = std::env::var("TVM_NUM_THREADS")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok());
        if let Some(n) = n.filter(|&n| n > 0) {
            // An error only means the pool exists already (another library built it).
            let _ = set_num_threads(n);
        }
    });
}
