package cache

// ListingLayout is the completion marker's value a rebuild leaves, for the
// tests that mark a listing whole by hand.
const ListingLayout = listingLayout
