module cilium-rs/gobdecode

go 1.22
