package botapi

// ParseResponse exposes parseResponse to the fuzz test.
var ParseResponse = parseResponse
