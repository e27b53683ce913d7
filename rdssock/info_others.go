//go:build !linux

package rdssock

// Counters fails: RDS needs Linux.
func (c *Conn) Counters() ([]Counter, error) { return nil, notLinux() }

// Connections fails: RDS needs Linux.
func (c *Conn) Connections() ([]Connection, error) { return nil, notLinux() }

// Messages fails: RDS needs Linux.
func (c *Conn) Messages(q MessageQueue) ([]QueuedMessage, error) { return nil, notLinux() }

// Sockets fails: RDS needs Linux.
func (c *Conn) Sockets() ([]SocketInfo, error) { return nil, notLinux() }

// TCPSockets fails: RDS needs Linux.
func (c *Conn) TCPSockets() ([]TCPSocket, error) { return nil, notLinux() }

// IBConnections fails: RDS needs Linux.
func (c *Conn) IBConnections() ([]IBConnection, error) { return nil, notLinux() }
