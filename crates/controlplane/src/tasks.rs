//! Every background task of the agent, owned in one place: started with a
//! name, cancelled together at shutdown and waited for, so SIGTERM returns
//! only once no task can still touch a socket, a file or a map (or the
//! grace period ran out, which is logged with the names of the laggards).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tokio_util::task::TaskTracker;

/// A handle to the agent's tasks, cheap to clone.
#[derive(Clone, Default)]
pub struct Tasks {
    tracker: TaskTracker,
    cancel: CancellationToken,
    /// Tasks still running, by name (several may share one).
    running: Arc<Mutex<BTreeMap<&'static str, usize>>>,
}

/// Counts a task as running for as long as it lives, however it ends.
struct Running {
    name: &'static str,
    running: Arc<Mutex<BTreeMap<&'static str, usize>>>,
}

impl Running {
    fn new(name: &'static str, running: &Arc<Mutex<BTreeMap<&'static str, usize>>>) -> Self {
        *running.lock().expect("tasks lock").entry(name).or_default() += 1;
        Self {
            name,
            running: Arc::clone(running),
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let mut running = self.running.lock().expect("tasks lock");
        if let Some(n) = running.get_mut(self.name) {
            *n -= 1;
            if *n == 0 {
                running.remove(self.name);
            }
        }
    }
}

impl Tasks {
    /// Runs `task` until it ends or the agent stops, whichever is first: at
    /// shutdown it is dropped at its next await point.
    pub fn spawn<F>(&self, name: &'static str, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let cancel = self.cancel.clone();
        let guard = Running::new(name, &self.running);
        self.tracker.spawn(async move {
            let _guard = guard;
            tokio::select! {
                _ = cancel.cancelled() => {}
                _ = task => {}
            }
        });
    }

    /// Runs a task that stops by itself once told to (a server removing its
    /// socket, say): `task` gets the signal and is waited for, not dropped.
    pub fn spawn_graceful<F, Fut>(&self, name: &'static str, task: F)
    where
        F: FnOnce(WaitForCancellationFutureOwned) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let guard = Running::new(name, &self.running);
        let fut = task(self.cancel.clone().cancelled_owned());
        self.tracker.spawn(async move {
            let _guard = guard;
            fut.await
        });
    }

    /// Runs blocking work (map writes, a program attach) on the blocking
    /// pool, counted as a task: shutdown waits for it, as it cannot be
    /// dropped halfway. Once shutdown has begun, new work is not started.
    pub fn spawn_blocking<F>(&self, name: &'static str, work: F)
    where
        F: FnOnce() + Send + 'static,
    {
        if self.is_stopping() {
            return;
        }
        let guard = Running::new(name, &self.running);
        self.tracker.spawn_blocking(move || {
            let _guard = guard;
            work()
        });
    }

    /// Resolves once shutdown has begun.
    pub fn stopping(&self) -> WaitForCancellationFutureOwned {
        self.cancel.clone().cancelled_owned()
    }

    /// For threads, which cannot await: whether shutdown has begun.
    pub fn is_stopping(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Names of the tasks still running, with how many share each name.
    pub fn running(&self) -> Vec<(&'static str, usize)> {
        let running = self.running.lock().expect("tasks lock");
        running.iter().map(|(name, n)| (*name, *n)).collect()
    }

    /// Tells every task to stop, without waiting for them.
    pub fn stop(&self) {
        self.cancel.cancel();
        self.tracker.close();
    }

    /// Tells every task to stop and waits for them for at most `grace`;
    /// returns the tasks that were still running then.
    pub async fn shutdown(&self, grace: Duration) -> Vec<(&'static str, usize)> {
        self.stop();
        let _ = tokio::time::timeout(grace, self.tracker.wait()).await;
        self.running()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn shutdown_stops_every_task_and_waits_for_the_graceful_ones() {
        let tasks = Tasks::default();
        tasks.spawn("forever", std::future::pending());
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        tasks.spawn_graceful("server", |stop| async move {
            stop.await;
            // what a server does after it is told: clean up, then end
            tokio::time::sleep(Duration::from_millis(20)).await;
            let _ = done_tx.send(());
        });
        tasks.spawn("quick", async {});
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(tasks.running(), vec![("forever", 1), ("server", 1)]);

        let left = tasks.shutdown(Duration::from_secs(5)).await;
        assert!(left.is_empty(), "{left:?}");
        assert!(done_rx.await.is_ok(), "the graceful task finished its work");
        assert!(tasks.is_stopping());
    }

    #[tokio::test]
    async fn a_task_that_will_not_stop_is_named_after_the_grace_period() {
        let tasks = Tasks::default();
        tasks.spawn_graceful("stubborn", |_stop| std::future::pending());
        let left = tasks.shutdown(Duration::from_millis(20)).await;
        assert_eq!(left, vec![("stubborn", 1)]);
    }
}
