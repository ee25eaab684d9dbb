//! Relay's gRPC health: not serving until it follows the peer service
//! and reaches at least one node, re-judged every few seconds (what
//! Kubernetes' probes of the Deployment ask).

use crate::peers::Pool;
use hubble::health::health_check_response::ServingStatus;
use hubble::health::{HealthCheckRequest, HealthCheckResponse};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tonic::{Request, Response, Status};

const PROBE_INTERVAL: Duration = Duration::from_secs(5);

#[derive(Clone)]
pub struct RelayHealth {
    status: watch::Receiver<ServingStatus>,
}

impl RelayHealth {
    /// The health of `pool`, judged now and every few seconds after.
    pub fn start(pool: Arc<Pool>) -> Self {
        let (tx, status) = watch::channel(ServingStatus::NotServing);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(PROBE_INTERVAL);
            loop {
                tick.tick().await;
                let serving = pool.peer_service_connected()
                    && pool.list().iter().any(|p| p.channel.is_some());
                let now = if serving {
                    ServingStatus::Serving
                } else {
                    ServingStatus::NotServing
                };
                tx.send_if_modified(|s| std::mem::replace(s, now) != now);
                if tx.is_closed() {
                    return;
                }
            }
        });
        Self { status }
    }
}

type WatchStream = Pin<Box<dyn futures::Stream<Item = Result<HealthCheckResponse, Status>> + Send>>;

#[tonic::async_trait]
impl hubble::health::health_server::Health for RelayHealth {
    type WatchStream = WatchStream;

    async fn check(
        &self,
        req: Request<HealthCheckRequest>,
    ) -> Result<Response<HealthCheckResponse>, Status> {
        hubble::health_service_known(&req.into_inner().service)?;
        Ok(Response::new(HealthCheckResponse {
            status: *self.status.borrow() as i32,
        }))
    }

    async fn watch(
        &self,
        req: Request<HealthCheckRequest>,
    ) -> Result<Response<WatchStream>, Status> {
        hubble::health_service_known(&req.into_inner().service)?;
        let mut rx = self.status.clone();
        rx.mark_changed();
        let stream = futures::stream::unfold(rx, |mut rx| async move {
            rx.changed().await.ok()?;
            let status = *rx.borrow_and_update() as i32;
            Some((Ok(HealthCheckResponse { status }), rx))
        });
        Ok(Response::new(Box::pin(stream)))
    }
}
