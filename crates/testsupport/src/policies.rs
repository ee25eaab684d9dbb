//! Policies the end-to-end tests share.

/// db (app=db) takes TCP 5432 from web (app=web), nothing else.
pub const DB_FROM_WEB: &str = r#"
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: db-from-web
spec:
  endpointSelector:
    matchLabels: {app: db}
  ingress:
  - fromEndpoints:
    - matchLabels: {app: web}
    toPorts:
    - ports:
      - port: "5432"
        protocol: TCP
"#;
