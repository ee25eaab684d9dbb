//! Named background loops whose health `cilium status` reports, like
//! Cilium's controllers: each run records success or failure.

use api::models::{ControllerStatus, ControllerStatusStatus};
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

#[derive(Clone)]
pub struct Controllers {
    inner: Arc<Mutex<BTreeMap<String, ControllerStatusStatus>>>,
    tasks: crate::tasks::Tasks,
}

impl Controllers {
    /// Controllers whose runs are tasks of `tasks`, stopped with them.
    pub fn new(tasks: crate::tasks::Tasks) -> Self {
        Self {
            inner: Arc::default(),
            tasks,
        }
    }

    fn record<E: std::fmt::Display>(&self, name: &str, result: &Result<(), E>) {
        let mut map = self.inner.lock().expect("controller lock");
        let st = map.entry(name.to_owned()).or_default();
        let now = Some(api::timefmt::rfc3339(SystemTime::now()));
        match result {
            Ok(()) => {
                st.success_count += 1;
                st.consecutive_failure_count = 0;
                st.last_success_timestamp = now;
            }
            Err(msg) => {
                st.failure_count += 1;
                st.consecutive_failure_count += 1;
                st.last_failure_timestamp = now;
                st.last_failure_msg = msg.to_string();
                tracing::warn!(subsys = "controller", name, error = %msg, "Controller run failed");
            }
        }
    }

    /// Runs `run` now and then every `interval` until the agent stops.
    pub fn spawn<F, Fut, E>(&self, name: &'static str, interval: Duration, mut run: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = Result<(), E>> + Send,
        E: std::fmt::Display,
    {
        let this = self.clone();
        this.inner
            .lock()
            .expect("controller lock")
            .entry(name.to_owned())
            .or_default();
        self.tasks.spawn(name, async move {
            let mut tick = tokio::time::interval(interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let result = run().await;
                this.record(name, &result);
            }
        });
    }

    pub fn snapshot(&self) -> Vec<ControllerStatus> {
        let map = self.inner.lock().expect("controller lock");
        map.iter()
            .map(|(name, status)| ControllerStatus {
                name: name.clone(),
                status: status.clone(),
            })
            .collect()
    }
}
