//! Drop reasons (positive codes; the datapath returns them negated) and the
//! text Cilium prints for each.

macro_rules! drop_reasons {
    ($($name:ident = $code:expr, $text:expr;)*) => {
        $(pub const $name: u8 = $code;)*

        /// Cilium's text for a drop reason code.
        pub fn reason_text(code: u8) -> Option<&'static str> {
            match code {
                $($code => Some($text),)*
                _ => None,
            }
        }
    };
}

drop_reasons! {
    DROP_INVALID_SIP = 132, "Invalid source ip";
    DROP_POLICY = 133, "Policy denied";
    DROP_INVALID = 134, "Invalid packet";
    DROP_CT_INVALID_HDR = 135, "CT: Truncated or invalid header";
    DROP_FRAG_NEEDED = 136, "Fragmentation needed";
    DROP_CT_UNKNOWN_PROTO = 137, "CT: Unknown L4 protocol";
    DROP_UNKNOWN_L3 = 139, "Unsupported L3 protocol";
    DROP_MISSED_TAIL_CALL = 140, "Missed tail call";
    DROP_WRITE_ERROR = 141, "Error writing to packet";
    DROP_UNKNOWN_L4 = 142, "Unknown L4 protocol";
    DROP_UNKNOWN_ICMP_CODE = 143, "Unknown ICMPv4 code";
    DROP_UNKNOWN_ICMP_TYPE = 144, "Unknown ICMPv4 type";
    DROP_NO_TUNNEL_KEY = 147, "Error retrieving tunnel key";
    DROP_UNKNOWN_TARGET = 150, "Unknown L3 target address";
    DROP_UNROUTABLE = 151, "Stale or unroutable IP";
    DROP_CSUM_L3 = 153, "Error while correcting L3 checksum";
    DROP_CSUM_L4 = 154, "Error while correcting L4 checksum";
    DROP_CT_CREATE_FAILED = 155, "CT: Map insertion failed";
    DROP_INVALID_EXTHDR = 156, "Invalid IPv6 extension header";
    DROP_FRAG_NOSUPPORT = 157, "IP fragmentation not supported";
    DROP_NO_SERVICE = 158, "Service backend not found";
    DROP_NO_TUNNEL_ENDPOINT = 160, "No tunnel/encapsulation endpoint (datapath BUG!)";
    DROP_UNKNOWN_CT = 163, "Unknown connection tracking state";
    DROP_HOST_UNREACHABLE = 164, "Local host is unreachable";
    DROP_NO_CONFIG = 165, "No configuration available to perform policy decision";
    DROP_UNSUPPORTED_L2 = 166, "Unsupported L2 protocol";
    DROP_NAT_NO_MAPPING = 167, "No mapping for NAT masquerade";
    DROP_NO_FIB = 169, "FIB lookup failed";
    DROP_INVALID_IDENTITY = 171, "Invalid identity";
    DROP_UNKNOWN_SENDER = 172, "Unknown sender";
    DROP_FRAG_NOT_FOUND = 175, "First logical datagram fragment not found";
    DROP_POLICY_DENY = 181, "Policy denied by denylist";
    DROP_TTL_EXCEEDED = 196, "TTL exceeded";
    DROP_EP_NOT_READY = 203, "Endpoint policy program not available";
}
