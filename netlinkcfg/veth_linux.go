package netlinkcfg

import (
	"errors"
)

// SetupVethPair creates a veth pair whose peer end is created directly in
// its namespace (a new one when cfg.PeerNamespaceName is set), adds the
// addresses, and sets both ends up, together with the loopback links of
// both namespaces. On failure everything made so far is removed.
func SetupVethPair(cfg VethPairConfig) (*VethPair, error) {
	return setupVethPair(cfg)
}

func setupVethPair(cfg VethPairConfig) (_ *VethPair, err error) {
	if cfg.Name == "" || cfg.Peer == "" {
		return nil, invalidf("setup veth pair: Name and Peer are both required")
	}
	p := &VethPair{Name: cfg.Name, Peer: cfg.Peer, Addrs: cfg.Addrs, PeerAddrs: cfg.PeerAddrs}
	created := false
	defer func() {
		if err != nil {
			if !created {
				p.Name = "" // nothing to delete
			}
			p.Close()
		}
	}()

	p.NS = cfg.Namespace
	if p.NS == nil {
		if p.NS, err = CurrentNamespace(); err != nil {
			return nil, err
		}
		p.ownNS = true
	}
	if p.Handle, err = p.NS.Handle(); err != nil {
		return nil, err
	}
	switch {
	case cfg.PeerNamespace != nil:
		p.PeerNS = cfg.PeerNamespace
	case cfg.PeerNamespaceName != "":
		if p.PeerNS, err = CreateNamespace(cfg.PeerNamespaceName); err != nil {
			return nil, err
		}
		p.ownPeerNS, p.deletePeerNS = true, true
	default:
		p.PeerNS = p.NS
	}
	if p.PeerNS == p.NS {
		p.PeerHandle = p.Handle
	} else if p.PeerHandle, err = p.PeerNS.Handle(); err != nil {
		return nil, err
	}

	var peerNS *Namespace
	if p.PeerNS != p.NS {
		peerNS = p.PeerNS
	}
	if err = p.Handle.AddVethPair(cfg.Name, cfg.Peer, peerNS); err != nil {
		return nil, err
	}
	created = true
	for _, a := range cfg.Addrs {
		if err = p.Handle.AddAddr(cfg.Name, a); err != nil {
			return nil, err
		}
	}
	for _, a := range cfg.PeerAddrs {
		if err = p.PeerHandle.AddAddr(cfg.Peer, a); err != nil {
			return nil, err
		}
	}
	for _, step := range []struct {
		h    *Handle
		link string
	}{{p.Handle, "lo"}, {p.PeerHandle, "lo"}, {p.Handle, cfg.Name}, {p.PeerHandle, cfg.Peer}} {
		if err = step.h.SetUp(step.link); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Close deletes the pair (deleting one end removes both), closes the
// handles, deletes a peer namespace SetupVethPair created and closes the
// namespaces it opened. Namespaces passed in the config are left open.
func (p *VethPair) Close() error {
	var errs []error
	if p.Handle != nil && p.Name != "" {
		if err := p.Handle.DeleteLink(p.Name); err != nil && !errors.Is(err, ErrNotFound) {
			errs = append(errs, err)
		}
	}
	if p.PeerHandle != nil && p.PeerHandle != p.Handle {
		p.PeerHandle.Close()
	}
	if p.Handle != nil {
		p.Handle.Close()
	}
	p.Handle, p.PeerHandle = nil, nil
	if p.PeerNS != nil && p.deletePeerNS {
		if err := p.PeerNS.Delete(); err != nil {
			errs = append(errs, err)
		}
	} else if p.PeerNS != nil && p.ownPeerNS {
		errs = append(errs, p.PeerNS.Close())
	}
	if p.NS != nil && p.ownNS {
		errs = append(errs, p.NS.Close())
	}
	p.ownNS, p.ownPeerNS, p.deletePeerNS = false, false, false
	return errors.Join(errs...)
}
