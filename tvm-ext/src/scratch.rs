//! Scratch buffers kept between kernel calls, shared by every kernel family.

/// Buffers kept between calls, so that repeated kernel calls neither ask the
/// allocator for fresh pages (page faults dominate large, short-lived buffers)
/// nor zero them needlessly.
static POOL: std::sync::Mutex<Vec<Vec<f32>>> = std::sync::Mutex::new(Vec::new());
/// At most this many buffers are kept...
const POOL_BUFFERS: usize = 8;
/// ...each of at most this many elements (16 MiB). Kernels size their blocks
/// to about 1 MiB; the largest buffer is the bf16 fallback's f32 weights (13 MiB
/// for Kokoro's 1090 -> 1024-channel, 3-tap convolutions).
const POOL_MAX_LEN: usize = 4 << 20;

/// A buffer taken from the pool and given back when dropped. It derefs to its
/// first `len` elements; the `Vec` behind it stays as long as it ever was, so
/// a reused buffer is never zeroed again (3.6% of a short synthesis was
/// `memset` of im2col blocks that were overwritten next).
pub(crate) struct Scratch {
    buf: Vec<f32>,
    len: usize,
}

impl Scratch {
    /// An empty buffer, for a job whose size is not known yet: the largest pooled
    /// buffer, which is the least likely to need growing.
    pub fn new() -> Self {
        let taken = POOL.lock().ok().and_then(|mut p| {
            let i = p
                .iter()
                .enumerate()
                .max_by_key(|(_, v)| v.len())
                .map(|(i, _)| i)?;
            Some(p.swap_remove(i))
        });
        Scratch {
            buf: taken.unwrap_or_default(),
            len: 0,
        }
    }

    /// Sets the length to `len`; the contents are unspecified (but initialised).
    pub fn set_len(&mut self, len: usize) {
        if self.buf.len() < len {
            self.buf.resize(len, 0.0);
        }
        self.len = len;
        // Tests see NaN wherever a kernel would read what it did not write.
        #[cfg(test)]
        self.buf[..len].fill(f32::NAN);
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let v = std::mem::take(&mut self.buf);
        if v.is_empty() || v.len() > POOL_MAX_LEN {
            return;
        }
        if let Ok(mut p) = POOL.lock() {
            if p.len() < POOL_BUFFERS {
                p.push(v);
            } else if let Some((i, _)) = p.iter().enumerate().min_by_key(|(_, b)| b.len()) {
                // Keep the larger buffers: they are the costly ones to fault in.
                if p[i].len() < v.len() {
                    p[i] = v;
                }
            }
        }
    }
}

impl std::ops::Deref for Scratch {
    type Target = [f32];
    fn deref(&self) -> &[f32] {
        &self.buf[..self.len]
    }
}

impl std::ops::DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut [f32] {
        &mut self.buf[..self.len]
    }
}
