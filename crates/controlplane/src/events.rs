//! The agent's own notifications (Cilium's `AgentNotify` types), printed
//! by `cilium monitor --type agent` as `>> <name>: <json>`.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum AgentNotify {
    Start = 2,
    EndpointRegenerated = 3,
    EndpointRegenerateFailed = 4,
    PolicyUpdated = 5,
    PolicyDeleted = 6,
    EndpointCreated = 7,
    EndpointDeleted = 8,
    IpcacheUpserted = 9,
    IpcacheDeleted = 10,
    ServiceUpserted = 11,
    ServiceDeleted = 12,
}

impl AgentNotify {
    /// Cilium's name of the notification.
    pub fn text(self) -> &'static str {
        match self {
            Self::Start => "Cilium agent started",
            Self::EndpointRegenerated => "Endpoint regenerated",
            Self::EndpointRegenerateFailed => "Failed endpoint regeneration",
            Self::PolicyUpdated => "Policy updated",
            Self::PolicyDeleted => "Policy deleted",
            Self::EndpointCreated => "Endpoint created",
            Self::EndpointDeleted => "Endpoint deleted",
            Self::IpcacheUpserted => "IPCache entry upserted",
            Self::IpcacheDeleted => "IPCache entry deleted",
            Self::ServiceUpserted => "Service upserted",
            Self::ServiceDeleted => "Service deleted",
        }
    }
}
