package controllers_test

import (
	"github.com/fleetd-dev/fleetd/controllers"
	"github.com/fleetd-dev/fleetd/herdr"
	"github.com/fleetd-dev/fleetd/internal/store"
	"github.com/fleetd-dev/fleetd/internal/store/dirstore"
	"github.com/fleetd-dev/fleetd/mcp"
)

// The Manager is what the REST API reads members from, the herdr client is
// what it drives, and the directory is a Store.
var (
	_ mcp.MemberSource  = (*controllers.Manager)(nil)
	_ controllers.Herdr = (*herdr.Client)(nil)
	_ store.Store       = (*dirstore.Directory)(nil)
)
