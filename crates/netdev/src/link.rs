//! Links, addresses and routes over rtnetlink.

use crate::Error;
use futures::TryStreamExt;
use netlink_packet_route::address::AddressAttribute;
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::route::{RouteProtocol, RouteScope};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What the agent needs to know about a link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    pub index: u32,
    pub name: String,
    pub mac: [u8; 6],
    pub mtu: u32,
    pub up: bool,
}

impl Link {
    fn from_message(msg: &LinkMessage) -> Self {
        let mut link = Link {
            index: msg.header.index,
            name: String::new(),
            mac: [0; 6],
            mtu: 0,
            up: msg.header.flags.contains(LinkFlags::Up),
        };
        for attr in &msg.attributes {
            match attr {
                LinkAttribute::IfName(n) => link.name = n.clone(),
                LinkAttribute::Address(a) if a.len() == 6 => link.mac.copy_from_slice(a),
                LinkAttribute::Mtu(m) => link.mtu = *m,
                _ => {}
            }
        }
        link
    }
}

/// A netlink connection in the calling thread's network namespace; a
/// clone shares it.
#[derive(Clone)]
pub struct Netlink {
    handle: rtnetlink::Handle,
}

impl Netlink {
    /// Opens the socket; must be called inside a tokio runtime.
    pub fn connect() -> Result<Self, Error> {
        let (conn, handle, _) = rtnetlink::new_connection().map_err(Error::Connect)?;
        tokio::spawn(conn);
        Ok(Self { handle })
    }

    /// Opens a socket bound to `ns`; the calling thread ends where it began.
    pub fn connect_in(ns: &crate::NetNs) -> Result<Self, Error> {
        ns.run(Self::connect)?
    }

    pub fn handle(&self) -> &rtnetlink::Handle {
        &self.handle
    }

    pub async fn link_by_name(&self, name: &str) -> Result<Option<Link>, Error> {
        let mut stream = self
            .handle
            .link()
            .get()
            .match_name(name.to_owned())
            .execute();
        match stream.try_next().await {
            Ok(Some(msg)) => Ok(Some(Link::from_message(&msg))),
            Ok(None) => Ok(None),
            Err(rtnetlink::Error::NetlinkError(e)) if e.raw_code() == -libc::ENODEV => Ok(None),
            Err(e) => Err(Error::nl("get link", name)(e)),
        }
    }

    /// The link named `name`, which must exist.
    pub async fn require_link(&self, name: &str) -> Result<Link, Error> {
        self.link_by_name(name)
            .await?
            .ok_or_else(|| Error::NoLink(name.into()))
    }

    pub async fn links(&self) -> Result<Vec<Link>, Error> {
        let msgs = self.link_messages().await?;
        Ok(msgs.iter().map(Link::from_message).collect())
    }

    /// Every link as the kernel describes it.
    pub(crate) async fn link_messages(&self) -> Result<Vec<LinkMessage>, Error> {
        self.handle
            .link()
            .get()
            .execute()
            .try_collect()
            .await
            .map_err(Error::nl("list", "links"))
    }

    pub async fn set_up(&self, index: u32) -> Result<(), Error> {
        let msg = rtnetlink::LinkUnspec::new_with_index(index).up().build();
        self.set_link(msg, "set up", &index.to_string()).await
    }

    /// Creates a link; `what` and `name` say which in an error.
    pub async fn add_link(
        &self,
        msg: LinkMessage,
        what: &'static str,
        name: &str,
    ) -> Result<(), Error> {
        self.handle
            .link()
            .add(msg)
            .execute()
            .await
            .map_err(Error::nl(what, name))
    }

    /// Creates a link and returns the kernel's description of it, echoed
    /// in the same round trip (`NLM_F_ECHO`, honoured for new links since
    /// Linux 6.3). None from a kernel that does not echo: the link exists,
    /// the caller must look it up.
    pub async fn add_link_echoed(
        &self,
        msg: LinkMessage,
        what: &'static str,
        name: &str,
    ) -> Result<Option<LinkMessage>, Error> {
        use futures::StreamExt;
        use netlink_packet_route::RouteNetlinkMessage;
        use rtnetlink::packet_core::{
            NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_ECHO, NLM_F_EXCL,
            NLM_F_REQUEST,
        };
        let mut req = NetlinkMessage::from(RouteNetlinkMessage::NewLink(msg));
        req.header.flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ECHO;
        let created = async {
            let mut echoed = None;
            let mut replies = self.handle.clone().request(req)?;
            while let Some(reply) = replies.next().await {
                match reply.payload {
                    NetlinkPayload::Error(e) => return Err(rtnetlink::Error::NetlinkError(e)),
                    NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(m)) => {
                        echoed = Some(m)
                    }
                    _ => {}
                }
            }
            Ok(echoed)
        };
        created.await.map_err(Error::nl(what, name))
    }

    /// Changes a link's attributes.
    pub async fn set_link(
        &self,
        msg: LinkMessage,
        what: &'static str,
        name: &str,
    ) -> Result<(), Error> {
        self.handle
            .link()
            .set(msg)
            .execute()
            .await
            .map_err(Error::nl(what, name))
    }

    /// Gives a link the clsact qdisc that tc filters hang on; one it has
    /// already is fine. Adding it while the link is down is cheaper: on a
    /// link that is up the kernel deactivates the device to graft it and
    /// waits for an RCU grace period (about 0.3-0.5 ms here).
    pub async fn add_clsact(&self, index: u32) -> Result<(), Error> {
        use futures::StreamExt;
        use netlink_packet_route::tc::{TcAttribute, TcHandle, TcMessage};
        use rtnetlink::packet_core::{
            NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REQUEST,
        };
        let mut msg = TcMessage::with_index(index as i32);
        msg.header.parent = TcHandle::INGRESS; // TC_H_CLSACT is the same value
        msg.header.handle = TcHandle::from(0xffff_0000);
        msg.attributes.push(TcAttribute::Kind("clsact".into()));
        let mut req = NetlinkMessage::from(
            netlink_packet_route::RouteNetlinkMessage::NewQueueDiscipline(msg),
        );
        req.header.flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
        let added = async {
            let mut replies = self.handle.clone().request(req)?;
            while let Some(reply) = replies.next().await {
                if let NetlinkPayload::Error(e) = reply.payload {
                    return Err(rtnetlink::Error::NetlinkError(e));
                }
            }
            Ok(())
        };
        match added.await {
            Err(rtnetlink::Error::NetlinkError(e)) if e.raw_code() == -libc::EEXIST => Ok(()),
            other => other.map_err(Error::nl("add clsact qdisc to", index.to_string())),
        }
    }

    pub async fn delete_link(&self, index: u32) -> Result<(), Error> {
        self.handle
            .link()
            .del(index)
            .execute()
            .await
            .map_err(Error::nl("delete link", index.to_string()))
    }

    /// Addresses of either family configured on a link (or on all links
    /// when None).
    async fn addrs(&self, index: Option<u32>) -> Result<Vec<(u32, IpAddr, u8)>, Error> {
        let mut req = self.handle.address().get();
        if let Some(i) = index {
            req = req.set_link_index_filter(i);
        }
        let msgs: Vec<_> = req
            .execute()
            .try_collect()
            .await
            .map_err(Error::nl("list", "addresses"))?;
        let mut out = Vec::new();
        for m in msgs {
            for attr in &m.attributes {
                if let AddressAttribute::Local(ip) | AddressAttribute::Address(ip) = attr {
                    let entry = (m.header.index, *ip, m.header.prefix_len);
                    if !out.contains(&entry) {
                        out.push(entry);
                    }
                }
            }
        }
        Ok(out)
    }

    /// IPv4 addresses configured on a link (or on all links when None).
    pub async fn ipv4_addrs(&self, index: Option<u32>) -> Result<Vec<(u32, Ipv4Addr, u8)>, Error> {
        Ok(self
            .addrs(index)
            .await?
            .into_iter()
            .filter_map(|(i, ip, len)| match ip {
                IpAddr::V4(ip) => Some((i, ip, len)),
                IpAddr::V6(_) => None,
            })
            .collect())
    }

    /// IPv6 addresses configured on a link (or on all links when None).
    pub async fn ipv6_addrs(&self, index: Option<u32>) -> Result<Vec<(u32, Ipv6Addr, u8)>, Error> {
        Ok(self
            .addrs(index)
            .await?
            .into_iter()
            .filter_map(|(i, ip, len)| match ip {
                IpAddr::V6(ip) => Some((i, ip, len)),
                IpAddr::V4(_) => None,
            })
            .collect())
    }

    /// Adds `ip/prefix` to a link unless it is already there.
    pub async fn ensure_ipv4_addr(
        &self,
        index: u32,
        ip: Ipv4Addr,
        prefix: u8,
    ) -> Result<(), Error> {
        if self
            .ipv4_addrs(Some(index))
            .await?
            .iter()
            .any(|(_, a, p)| *a == ip && *p == prefix)
        {
            return Ok(());
        }
        self.handle
            .address()
            .add(index, IpAddr::V4(ip), prefix)
            .replace()
            .execute()
            .await
            .map_err(Error::nl("add address", format!("{ip}/{prefix}")))
    }

    /// Adds (or refreshes) an IPv6 address without duplicate address
    /// detection, as Cilium configures pods' and cilium_host's: the address
    /// is given out by IPAM, and DAD would hold it tentative for a second.
    pub async fn ensure_ipv6_addr(
        &self,
        index: u32,
        ip: Ipv6Addr,
        prefix: u8,
    ) -> Result<(), Error> {
        let mut add = self
            .handle
            .address()
            .add(index, IpAddr::V6(ip), prefix)
            .replace();
        add.message_mut().header.flags |= netlink_packet_route::address::AddressHeaderFlags::Nodad;
        add.execute()
            .await
            .map_err(Error::nl("add address", format!("{ip}/{prefix}")))
    }

    /// Installs (or replaces) an IPv6 route out of link `index`: on-link, or
    /// via `gateway`, with the link's MTU unless `mtu` says; `proto kernel`
    /// as Cilium does.
    pub async fn replace_route6(
        &self,
        index: u32,
        (dst, len): (Ipv6Addr, u8),
        gateway: Option<Ipv6Addr>,
        src: Option<Ipv6Addr>,
        mtu: Option<u32>,
    ) -> Result<(), Error> {
        use netlink_packet_route::route::{RouteAttribute, RouteMetric};
        let mut b = rtnetlink::RouteMessageBuilder::<Ipv6Addr>::new()
            .destination_prefix(dst, len)
            .output_interface(index)
            .protocol(RouteProtocol::Kernel);
        b = match gateway {
            Some(gw) => b.gateway(gw).scope(RouteScope::Universe),
            None => b.scope(RouteScope::Link),
        };
        if let Some(s) = src {
            b = b.pref_source(s);
        }
        if let Some(mtu) = mtu {
            b.get_mut()
                .attributes
                .push(RouteAttribute::Metrics(vec![RouteMetric::Mtu(mtu)]));
        }
        self.handle
            .route()
            .add(b.build())
            .replace()
            .execute()
            .await
            .map_err(Error::nl("replace route", format!("{dst}/{len}")))
    }

    /// Removes an IPv6 route out of link `index`; one already gone is not
    /// an error.
    pub async fn delete_route6(&self, index: u32, (dst, len): (Ipv6Addr, u8)) -> Result<(), Error> {
        let msg = rtnetlink::RouteMessageBuilder::<Ipv6Addr>::new()
            .destination_prefix(dst, len)
            .output_interface(index)
            .build();
        match self.handle.route().del(msg).execute().await {
            Ok(()) => Ok(()),
            Err(rtnetlink::Error::NetlinkError(e)) if e.raw_code() == -libc::ESRCH => Ok(()),
            Err(e) => Err(Error::nl("delete route", format!("{dst}/{len}"))(e)),
        }
    }

    /// Installs (or replaces) a route, `proto kernel` as Cilium does.
    pub async fn replace_route(&self, route: &Route) -> Result<(), Error> {
        self.handle
            .route()
            .add(route.message())
            .replace()
            .execute()
            .await
            .map_err(Error::nl("replace route", route.to_string()))
    }

    /// Removes a route; one that is already gone is not an error.
    pub async fn delete_route(&self, route: &Route) -> Result<(), Error> {
        match self.handle.route().del(route.message()).execute().await {
            Ok(()) => Ok(()),
            Err(rtnetlink::Error::NetlinkError(e)) if e.raw_code() == -libc::ESRCH => Ok(()),
            Err(e) => Err(Error::nl("delete route", route.to_string())(e)),
        }
    }
}

/// An IPv4 route out of one link: on-link, or via a gateway, optionally with
/// a preferred source and an MTU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    pub index: u32,
    pub dst: Ipv4Addr,
    pub len: u8,
    pub via: Option<Ipv4Addr>,
    pub src: Option<Ipv4Addr>,
    pub mtu: Option<u32>,
}

impl Route {
    pub fn new(index: u32, dst: Ipv4Addr, len: u8) -> Self {
        Self {
            index,
            dst,
            len,
            via: None,
            src: None,
            mtu: None,
        }
    }

    pub fn via(self, gateway: Ipv4Addr) -> Self {
        Self {
            via: Some(gateway),
            ..self
        }
    }

    pub fn src(self, src: Ipv4Addr) -> Self {
        Self {
            src: Some(src),
            ..self
        }
    }

    pub fn mtu(self, mtu: u32) -> Self {
        Self {
            mtu: Some(mtu),
            ..self
        }
    }

    fn message(&self) -> netlink_packet_route::route::RouteMessage {
        use netlink_packet_route::route::{RouteAttribute, RouteMetric};
        let mut b = rtnetlink::RouteMessageBuilder::<Ipv4Addr>::new()
            .destination_prefix(self.dst, self.len)
            .output_interface(self.index)
            .protocol(RouteProtocol::Kernel);
        b = match self.via {
            Some(gw) => b.gateway(gw).scope(RouteScope::Universe),
            None => b.scope(RouteScope::Link),
        };
        if let Some(s) = self.src {
            b = b.pref_source(s);
        }
        if let Some(mtu) = self.mtu {
            b.get_mut()
                .attributes
                .push(RouteAttribute::Metrics(vec![RouteMetric::Mtu(mtu)]));
        }
        b.build()
    }
}

impl std::fmt::Display for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.dst, self.len)?;
        if let Some(gw) = self.via {
            write!(f, " via {gw}")?;
        }
        Ok(())
    }
}
