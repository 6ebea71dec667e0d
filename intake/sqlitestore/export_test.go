package sqlitestore

// DueSQL is the due listing's statement, with the table placeholder.
const DueSQL = dueSQL

var FillSQL = fillSQL
