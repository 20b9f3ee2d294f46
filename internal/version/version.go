package version

// Version is the build's version; "dev" when built without the Makefile.
var Version = "dev"
