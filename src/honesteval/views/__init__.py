"""Looking at stored state: text and markdown, the HTML report and its figures, status, compare,
export. Nothing here runs a trial."""
