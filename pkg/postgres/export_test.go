package postgres

// SearchFindingsQuery exposes the statement SearchFindings runs, for the
// plan test.
var SearchFindingsQuery = searchFindingsQuery
