//! A call's future that always finishes: dropped before its record is made, the call is
//! cancelled and run to its end on a task of its own.

use crate::record::CallRecord;
use tokio_util::sync::CancellationToken;

/// A call's lifecycle, polled where its caller polls it; dropped unfinished, it is finished on a
/// task of its own (cancelled first, when it was given a token to cancel), so that a call, once
/// started, always reaches its end and its record.
pub struct FinishOnDrop {
    lifecycle: Option<std::pin::Pin<Box<dyn std::future::Future<Output = CallRecord> + Send>>>,
    cancel: Option<CancellationToken>,
}

impl FinishOnDrop {
    pub fn new(
        lifecycle: std::pin::Pin<Box<dyn std::future::Future<Output = CallRecord> + Send>>,
        cancel: Option<CancellationToken>,
    ) -> FinishOnDrop {
        FinishOnDrop {
            lifecycle: Some(lifecycle),
            cancel,
        }
    }
}

impl std::future::Future for FinishOnDrop {
    type Output = CallRecord;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<CallRecord> {
        let Some(lifecycle) = self.lifecycle.as_mut() else {
            panic!("a call's future was polled again after it returned its record");
        };
        let ended = lifecycle.as_mut().poll(cx);
        if ended.is_ready() {
            self.lifecycle = None;
        }
        ended
    }
}

impl Drop for FinishOnDrop {
    fn drop(&mut self) {
        let Some(lifecycle) = self.lifecycle.take() else {
            return;
        };
        if let Some(cancel) = &self.cancel {
            cancel.cancel();
        }
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => drop(runtime.spawn(lifecycle)),
            // No runtime to finish on (it is shutting down): nothing can run the call further.
            Err(_) => tracing::warn!("a call was dropped while its runtime shut down"),
        }
    }
}
