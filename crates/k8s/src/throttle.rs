//! client-go's client-side rate limit (`k8s-client-qps`, `k8s-client-burst`):
//! a token bucket every request to the API server takes a token from,
//! waiting for one when the bucket is empty, so an agent on every node
//! cannot flood the API server (a thousand pods' CiliumEndpoint writes
//! after a restart, say). Watches take no token, as in client-go: one is
//! a long-lived stream, not load, and a start that opens a dozen of them
//! would otherwise hold every write behind them for seconds.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// client-go's limits when none are set (QPS and Burst 0).
pub const DEFAULT_QPS: f32 = 5.0;
pub const DEFAULT_BURST: u32 = 10;

#[derive(Debug)]
struct Bucket {
    qps: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    /// Takes a token; how long the caller waits for it.
    fn take(&mut self, now: Instant) -> Duration {
        let refill = now.saturating_duration_since(self.last).as_secs_f64() * self.qps;
        self.tokens = (self.tokens + refill).min(self.burst);
        self.last = now;
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.qps)
        }
    }
}

/// The layer that puts every request through one bucket.
#[derive(Clone, Debug)]
pub struct Throttle(Arc<Mutex<Bucket>>);

impl Throttle {
    /// `qps` requests a second on average, `burst` at once; zero takes
    /// client-go's defaults.
    pub fn new(qps: f32, burst: u32) -> Self {
        let qps = if qps > 0.0 { qps } else { DEFAULT_QPS };
        let burst = if burst > 0 { burst } else { DEFAULT_BURST };
        Self(Arc::new(Mutex::new(Bucket {
            qps: f64::from(qps),
            burst: f64::from(burst),
            tokens: f64::from(burst),
            last: Instant::now(),
        })))
    }

    fn wait(&self) -> Duration {
        self.0.lock().expect("throttle lock").take(Instant::now())
    }
}

impl<S> tower::Layer<S> for Throttle {
    type Service = Throttled<S>;

    fn layer(&self, inner: S) -> Throttled<S> {
        Throttled {
            inner,
            throttle: self.clone(),
        }
    }
}

pub struct Throttled<S> {
    inner: S,
    throttle: Throttle,
}

/// Whether `uri` asks for a watch stream (`?watch=true` or `?watch=1`).
fn is_watch(uri: &http::Uri) -> bool {
    uri.query()
        .is_some_and(|q| q.split('&').any(|kv| kv == "watch=true" || kv == "watch=1"))
}

impl<S, B> tower::Service<http::Request<B>> for Throttled<S>
where
    S: tower::Service<http::Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        let wait = if is_watch(req.uri()) {
            Duration::ZERO
        } else {
            self.throttle.wait()
        };
        // the inner future sends nothing until polled: it waits its turn
        let sent = self.inner.call(req);
        Box::pin(async move {
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            sent.await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_watch_streams_skip_the_bucket() {
        let uri = |s: &str| s.parse::<http::Uri>().unwrap();
        assert!(is_watch(&uri("/api/v1/pods?watch=true&resourceVersion=5")));
        assert!(is_watch(&uri(
            "/apis/cilium.io/v2/ciliumnodes?fieldSelector=x&watch=1"
        )));
        assert!(!is_watch(&uri("/api/v1/pods?resourceVersion=5")));
        assert!(!is_watch(&uri("/api/v1/pods?watchful=true")));
        assert!(!is_watch(&uri("/api/v1/namespaces/watch=true/pods")));
    }

    #[test]
    fn a_burst_goes_at_once_then_requests_come_at_the_rate() {
        let t0 = Instant::now();
        let mut b = Bucket {
            qps: 10.0,
            burst: 3.0,
            tokens: 3.0,
            last: t0,
        };
        let waits: Vec<Duration> = (0..5).map(|_| b.take(t0)).collect();
        assert_eq!(&waits[..3], &[Duration::ZERO; 3]);
        assert_eq!(waits[3], Duration::from_millis(100));
        assert_eq!(waits[4], Duration::from_millis(200));
        // a second later the bucket is full again, never fuller
        let later = t0 + Duration::from_secs(2);
        assert_eq!(b.take(later), Duration::ZERO);
        assert!(b.tokens <= 2.0 + f64::EPSILON);
    }
}
